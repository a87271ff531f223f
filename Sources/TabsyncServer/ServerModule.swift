import TabsyncCore

/// Placeholder: the server is built in the server issue.
enum ServerModule {}
