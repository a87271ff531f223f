import TabsyncCore

/// Placeholder: the client library is built in the server issue.
enum ClientModule {}
