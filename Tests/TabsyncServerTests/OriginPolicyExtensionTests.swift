import Testing
@testable import TabsyncServer

/// Browser extensions' origins (`chrome-extension://ID`, `moz-extension://UUID`) in the origin
/// policy: `--allow-origin` accepts them, and a listed one is exactly what it allows.
@Suite("Origin policy: browser extensions")
struct OriginPolicyExtensionTests {
    let chromeID = "abcdefghijklmnopabcdefghijklmnop"

    @Test func allowOriginAcceptsExtensionOrigins() {
        for good in ["chrome-extension://\(chromeID)", "chrome-extension://\(chromeID)/",
                     "CHROME-EXTENSION://\(chromeID.uppercased())",
                     "moz-extension://6a1f0c2e-93b4-4d1a-9c55-0d3c2b8e7f10"] {
            #expect(OriginPolicy.isValidEntry(good), "\(good)")
        }
        for bad in ["chrome-extension://", "chrome-extension://short", "chrome-extension://\(chromeID)q",
                    "chrome-extension://abcdefghijklmnopabcdefghijklmnoz", "chrome-extension://\(chromeID)/popup.html",
                    "moz-extension://", "moz-extension://not-a-uuid!", "safari-web-extension://x"] {
            #expect(!OriginPolicy.isValidEntry(bad), "\(bad)")
        }
    }

    @Test func aListedExtensionIsAllowedAndNoOtherOne() {
        let policy = OriginPolicy(allowed: ["chrome-extension://\(chromeID)", "http://localhost:7070"],
                                  authEnabled: false, loopbackBind: true)
        #expect(policy.allows("chrome-extension://\(chromeID)"))
        #expect(policy.allows("chrome-extension://\(chromeID.uppercased())"))
        #expect(!policy.allows("chrome-extension://ponmlkjihgfedcbaponmlkjihgfedcba"))
        #expect(!policy.allows("moz-extension://6a1f0c2e-93b4-4d1a-9c55-0d3c2b8e7f10"))
        #expect(policy.allows("http://localhost:7070"))
    }

    @Test func anUnlistedExtensionIsRefusedOnALoopbackBindWithoutAuth() {
        let loopback = OriginPolicy(allowed: [], authEnabled: false, loopbackBind: true)
        #expect(!loopback.allows("chrome-extension://\(chromeID)"))
        #expect(OriginPolicy(allowed: [], authEnabled: true, loopbackBind: false).allows("chrome-extension://\(chromeID)"))
    }

    /// `moz-extension://*`: every Firefox extension's origin (each installation has a random UUID),
    /// and nothing else: no web page, no Chromium extension, not the literal `*` UUID.
    @Test func anyFirefoxExtensionAdmitsEveryMozExtensionOriginOnly() {
        #expect(OriginPolicy.isValidEntry("moz-extension://*"))
        #expect(OriginPolicy.isValidEntry("MOZ-EXTENSION://*/"))
        #expect(!OriginPolicy.isValidEntry("moz-extension://*x"))
        #expect(!OriginPolicy.isValidEntry("chrome-extension://*"))
        let policy = OriginPolicy(allowed: ["moz-extension://*", "http://127.0.0.1:7070"],
                                  authEnabled: false, loopbackBind: true)
        #expect(policy.allows("moz-extension://6a1f0c2e-93b4-4d1a-9c55-0d3c2b8e7f10"))
        #expect(policy.allows("moz-extension://0D3C2B8E-7F10-4D1A-9C55-6A1F0C2E93B4/"))
        #expect(policy.allows("http://127.0.0.1:7070"))
        #expect(!policy.allows("moz-extension://*"))
        #expect(!policy.allows("moz-extension://"))
        #expect(!policy.allows("moz-extension://not-a-uuid!"))
        #expect(!policy.allows("moz-extension://6a1f0c2e-93b4-4d1a-9c55-0d3c2b8e7f10/popup.html"))
        #expect(!policy.allows("chrome-extension://\(chromeID)"))
        #expect(!policy.allows("https://evil.example"))
        #expect(!policy.allows("http://localhost:7070"))
        #expect(!policy.allows("null"))
        // One UUID listed admits that one only.
        let one = OriginPolicy(allowed: ["moz-extension://6a1f0c2e-93b4-4d1a-9c55-0d3c2b8e7f10"],
                               authEnabled: false, loopbackBind: true)
        #expect(one.allows("moz-extension://6a1f0c2e-93b4-4d1a-9c55-0d3c2b8e7f10"))
        #expect(!one.allows("moz-extension://0d3c2b8e-7f10-4d1a-9c55-6a1f0c2e93b4"))
    }
}
