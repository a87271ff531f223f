import Foundation
import Testing
import TabsyncStore
@testable import TabsyncServerCore

/// Webhook registration on the core alone (ServerCore+Admin.swift, WebhookSpec.swift; docs/design.md,
/// "Webhooks"): what is accepted, what the store is asked, what the answer shows. The HTTP side and
/// the command are in Tests/thirdparty/test_webhooks_admin.py.
@Suite struct WebhookAdminRuleTests {
    static func secret(bytes: Int) -> String { "whsec_" + Data(repeating: 7, count: bytes).base64EncodedString() }

    static func spec(_ url: String = "https://hooks.example.com/in", secret: String = secret(bytes: 32)) -> WebhookSpec? {
        try? WebhookSpec.parse(url: url, workspaces: "team-*", secret: secret).get()
    }

    @Test func theBoundsOfAURLAndASecretAreExact() {
        let base = "https://h.example.com/"
        #expect(Self.spec(base + String(repeating: "a", count: WebhookSpec.maxURLBytes - base.utf8.count)) != nil)
        #expect(Self.spec(base + String(repeating: "a", count: WebhookSpec.maxURLBytes - base.utf8.count + 1)) == nil)
        #expect(Self.spec(secret: Self.secret(bytes: 24)) != nil && Self.spec(secret: Self.secret(bytes: 64)) != nil)
        #expect(Self.spec(secret: Self.secret(bytes: 23)) == nil && Self.spec(secret: Self.secret(bytes: 65)) == nil)
        #expect(Self.spec("HTTPS://HOOKS.example.com/") != nil && Self.spec("http://[::1]:8080/x") != nil)
    }

    @Test func neitherAPrintedRequestNorAnErrorHoldsTheSecret() throws {
        let secret = Self.secret(bytes: 40)
        let spec = try #require(Self.spec(secret: secret))
        let key = String(secret.dropFirst(6))
        for text in ["\(AdminRequest.addWebhook(spec))", String(reflecting: spec), "\(spec)"] {
            #expect(!text.contains(key), "\(text)")
        }
        var dumped = ""
        dump(spec, to: &dumped)
        #expect(!dumped.contains(key))
    }

    @Test func anAdminRegistersAHookUnderANewIdAndTheAnswerNeverShowsTheSecret() throws {
        var h = AdminRuleTests.harness()
        let spec = try #require(Self.spec())
        let asked = AdminRuleTests.admin(&h, .addWebhook(spec), AdminRuleTests.root)
        var stored: [WebhookRegistration] = []
        for case .admin(let call) in asked { if case .addWebhook(let hook) = call.work { stored.append(hook) } }
        let hook = try #require(stored.first)
        #expect(stored.count == 1 && WebhookSpec.isValidId(hook.id))
        #expect(hook.url == spec.url && hook.workspaces == "team-*" && hook.secret == spec.secret && hook.isEnabled)
        let answered = AdminRuleTests.answer(&h, asked)
        let response = try #require(AdminRuleTests.response(answered))
        #expect(response.status == 201)
        let body = AdminRuleTests.text(response)
        #expect(body.contains(hook.id) && !body.contains("secret") && !body.contains(String(spec.secret.dropFirst(6))))

        // A second registration gets another id.
        let again = AdminRuleTests.admin(&h, .addWebhook(spec), AdminRuleTests.root, id: 101)
        for case .admin(let call) in again { if case .addWebhook(let other) = call.work { #expect(other.id != hook.id) } }
    }

    @Test func aFullStoreIsAnswered409AndAnUnknownHook404() throws {
        var h = AdminRuleTests.harness()
        let asked = AdminRuleTests.admin(&h, .addWebhook(try #require(Self.spec())), AdminRuleTests.root)
        for case .admin(let call) in asked {
            #expect(AdminRuleTests.response(h.handle(.adminAnswered(call, .success(.webhookAdded(nil)))))?.status == 409)
        }
        let removing = AdminRuleTests.admin(&h, .removeWebhook("wh_" + String(repeating: "a", count: 32)), AdminRuleTests.root, id: 101)
        for case .admin(let call) in removing {
            #expect(AdminRuleTests.response(h.handle(.adminAnswered(call, .success(.webhookRemoved(false)))))?.status == 404)
        }
        let enabling = AdminRuleTests.admin(&h, .enableWebhook("wh_" + String(repeating: "b", count: 32)), AdminRuleTests.root, id: 103)
        for case .admin(let call) in enabling {
            #expect(call.work == .enableWebhook("wh_" + String(repeating: "b", count: 32)))
            #expect(AdminRuleTests.response(h.handle(.adminAnswered(call, .success(.webhookEnabled(nil)))))?.status == 404)
        }
        let listing = AdminRuleTests.admin(&h, .listWebhooks, AdminRuleTests.root, id: 102)
        for case .admin(let call) in listing {
            #expect(AdminRuleTests.response(h.handle(.adminAnswered(call, .failure(.readFailed("disk")))))?.status == 503)
        }
    }
}
