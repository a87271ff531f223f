// DO NOT EDIT. Written by scripts/gen-proto with Sources/TabsyncProto/Generated/tabsync.pb.swift;
// scripts/check-generated compares this with the sha256 of proto/tabsync/v1/tabsync.proto.
// sha256: ebd1eabd09bc018680cdebffbc5d538ac39874ea2e69953b0ab537f2678917b7
