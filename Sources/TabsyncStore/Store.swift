import TabsyncCore

/// Placeholder until the store issue: the store protocol is defined with the server.
enum StoreModule {}
