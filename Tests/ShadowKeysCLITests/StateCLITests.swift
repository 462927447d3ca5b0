import Foundation
import ShadowCore
import ShadowJOSE
import ShadowTestSupport
import Testing

/// `shadow-keys state` and `verify-token --apple --state`, as a server's scripts use them.
@Suite(.tags(.multiProcess), .ownThreads) struct StateCLITests {
    static let client = "com.example.app"
    static let subject = "001234.8a2b3c4d5e6f70819a2b3c4d5e6f7081.1234"
    let directory: TemporaryDirectory
    let keyFile: String
    let vault: String
    let jwks: String
    let signer: JWSSigner

    init() throws {
        directory = try TemporaryDirectory()
        keyFile = try directory.write(
            "vault.key", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n", mode: 0o600)
        vault = directory.path + "/vault.skv"
        signer = try JWSSigner.rs256(TestKeys.rsa, keyID: "apple-1")
        jwks = try directory.write("apple-keys.json", TestKeys.jwksJSON([try signer.publicJWK()]))
        let created = try CLIRunner.run(["vault", "init", "--vault", vault, "--key-file", keyFile])
        guard created.status == 0 else { throw CLIRunnerError("vault init failed: \(created.stderr)") }
    }

    var vaultOptions: [String] { ["--vault", vault, "--key-file", keyFile] }

    func state(_ arguments: [String], stdin: String? = nil) throws -> CLIResult {
        try CLIRunner.run(["state"] + arguments + vaultOptions, stdin: stdin)
    }

    func user(_ subject: String = subject) -> [String] { ["--client-id", Self.client, "--sub", subject] }

    func token(issuedAt: Int64, subject: String = subject, extra: JSONObject = [:]) throws -> String {
        var claims: JSONObject = [
            "iss": "https://appleid.apple.com", "aud": .string(Self.client), "sub": .string(subject),
            "iat": .int(issuedAt), "exp": .int(issuedAt + 86400),
            "email": "q8xj2n4k7d@privaterelay.appleid.com", "email_verified": true, "is_private_email": true,
        ]
        for member in extra { claims.set(member.name, member.value) }
        return try signer.sign(claims: claims)
    }

    func notification(_ type: String, eventTimeMs: Int64, subject: String = subject, jti: String) throws -> String {
        let events: JSONObject = ["type": .string(type), "sub": .string(subject), "event_time": .int(eventTimeMs)]
        let claims: JSONObject = [
            "iss": "https://appleid.apple.com", "aud": .string(Self.client), "iat": .int(eventTimeMs / 1000),
            "exp": .int(eventTimeMs / 1000 + 86400), "jti": .string(jti),
            "events": .string(JSONValue.object(events).serialized()),
        ]
        return JSONValue.object(["payload": .string(try signer.sign(claims: claims))]).serialized()
    }

    private var now: [String] { ["--now", "1700001100"] }

    func applyToken(_ token: String) throws -> CLIResult {
        try state(
            ["apply-token", "--token-env", "T", "--client-id", Self.client, "--jwks", jwks, "--json"] + now, stdin: nil,
            environment: ["T": token])
    }

    func state(_ arguments: [String], stdin: String?, environment: [String: String]) throws -> CLIResult {
        try CLIRunner.run(["state"] + arguments + vaultOptions, stdin: stdin, environment: environment)
    }

    func verifyWithState(_ token: String) throws -> CLIResult {
        try CLIRunner.run(
            ["verify-token", "--apple", "--state", "--aud", Self.client, "--jwks", jwks, "--token-env", "T", "--json"]
                + now + vaultOptions,
            environment: ["T": token])
    }

    @Test func aRevokedSubjectsOldTokenIsRefusedAndANewSignInIsAccepted() throws {
        let old = try token(issuedAt: 1_700_000_000)
        #expect(try state(["check"] + user()).status == 14)
        #expect(try state(["show", "--json"] + user()).json()["state"] as? String == "notFound")

        let signedIn = try applyToken(old)
        #expect(signedIn.status == 0, "\(signedIn.stderr)")
        let applied = try #require(try signedIn.json()["applied"] as? [[String: Any]])
        #expect(
            applied.count == 1 && applied[0]["old"] as? String == "notFound"
                && applied[0]["new"] as? String == "authorized")
        #expect(try state(["check"] + user()).status == 0)
        #expect(try verifyWithState(old).status == 0)

        let revoked = try state(
            ["apply-notification", "--client-id", Self.client, "--jwks", jwks, "--json"] + now,
            stdin: try notification("consent-revoked", eventTimeMs: 1_700_000_500_000, jti: "jti-revoke"))
        #expect(revoked.status == 0, "\(revoked.stderr)")
        #expect((try revoked.json()["applied"] as? [[String: Any]])?.first?["new"] as? String == "revoked")
        let check = try state(["check", "--json"] + user())
        #expect(check.status == 14 && check.stderr.contains("revoked"))
        #expect(try check.json()["raw_value"] as? Int == 0)

        // The old token is refused with 14 and a stable code; verification without --state still passes.
        let refused = try verifyWithState(old)
        #expect(refused.status == 14, "\(refused.stderr)")
        #expect((try refused.json()["error"] as? [String: Any])?["code"] as? String == "credential_revoked")
        #expect(
            try CLIRunner.run(
                ["verify-token", "--apple", "--aud", Self.client, "--jwks", jwks, "--token-env", "T"] + now,
                environment: ["T": old]
            ).status == 0)
        // Recording it again does not re-authorize, and says so.
        #expect(try applyToken(old).status == 14)
        #expect(try state(["check"] + user()).status == 14)

        // A new sign-in after the revocation is accepted and re-authorizes.
        let fresh = try token(issuedAt: 1_700_001_000)
        #expect(try verifyWithState(fresh).status == 0)
        let again = try applyToken(fresh)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try state(["check"] + user()).status == 0)
        #expect(try verifyWithState(old).status == 14)

        let shown = try state(["show", "--json"] + user()).json()
        #expect(
            shown["state"] as? String == "authorized" && shown["raw_value"] as? Int == 1
                && shown["cause"] as? String == "sign-in")
        #expect(shown["since"] as? String == "2023-11-14T22:30:00Z")
        let text = try state(["show"] + user())
        #expect(
            text.stdout.hasPrefix("state: authorized (1)\nsince: 2023-11-14T22:30:00Z\ncause: sign-in"),
            "\(text.stdout)")

        let history = try state(["history", "--json"] + user()).json()
        let entries = try #require(history["entries"] as? [[String: Any]])
        #expect(
            entries.map { "\($0["old"]!)>\($0["new"]!)" } == [
                "notFound>authorized", "authorized>revoked", "revoked>authorized",
            ])
        #expect(entries.allSatisfy { ($0["subject"] as? String)?.count == 64 })
        let audit = try state(["audit", "--verify", "--json"])
        let auditEntries = try audit.json()["entries"] as? Int
        #expect(audit.status == 0 && auditEntries == 3, "\(audit.stderr)")
    }

    @Test func lateDuplicateAndMetadataEventsAreOrderedByTheirOwnTime() throws {
        #expect(try applyToken(try token(issuedAt: 1_700_000_600)).status == 0)
        // A revocation that happened before this sign-in arrives late: no change.
        let late = try notification("account-delete", eventTimeMs: 1_700_000_300_000, jti: "jti-late")
        let lateResult = try state(
            ["apply-notification", "--client-id", Self.client, "--jwks", jwks] + now, stdin: late)
        #expect(
            lateResult.status == 0 && lateResult.stdout.contains("unchanged"),
            "\(lateResult.stdout)\(lateResult.stderr)")
        #expect(try state(["check"] + user()).status == 0)
        // Email events are metadata only.
        let email = try state(
            ["apply-notification", "--client-id", Self.client, "--jwks", jwks] + now,
            stdin: try notification("email-disabled", eventTimeMs: 1_700_000_700_000, jti: "jti-mail"))
        #expect(email.status == 0)
        let shown = try state(["show", "--json"] + user()).json()
        #expect(shown["state"] as? String == "authorized" && shown["email_forwarding"] as? Bool == false)
        // The same notification twice changes nothing, and writes no audit line.
        let log = try Data(contentsOf: URL(fileURLWithPath: vault + ".audit"))
        let duplicate = try state(
            ["apply-notification", "--client-id", Self.client, "--jwks", jwks, "--json"] + now,
            stdin: try notification("email-disabled", eventTimeMs: 1_700_000_700_000, jti: "jti-mail"))
        #expect((try duplicate.json()["applied"] as? [[String: Any]])?.first?["changed"] as? Bool == false)
        #expect(try Data(contentsOf: URL(fileURLWithPath: vault + ".audit")) == log)
        // An undocumented type applies nothing; a forged body applies nothing and exits 11.
        let unknown = try state(
            ["apply-notification", "--client-id", Self.client, "--jwks", jwks] + now,
            stdin: try notification("brand-new", eventTimeMs: 1_700_000_800_000, jti: "jti-new"))
        #expect(unknown.status == 0 && unknown.stderr.contains("nothing applied"))
        let forgedSigner = try JWSSigner.rs256(TestKeys.rsa2, keyID: "apple-1")
        let forged = JSONValue.object([
            "payload": .string(
                try forgedSigner.sign(claims: [
                    "iss": "https://appleid.apple.com", "aud": .string(Self.client), "iat": 1_700_000_900,
                    "exp": 1_700_090_000, "jti": "f",
                    "events": .string(
                        #"{"type":"consent-revoked","sub":"\#(Self.subject)","event_time":1700000900000}"#),
                ]))
        ]).serialized()
        #expect(
            try state(["apply-notification", "--client-id", Self.client, "--jwks", jwks] + now, stdin: forged).status
                == 11)
        #expect(try state(["check"] + user()).status == 0)
        #expect(try state(["audit", "--verify"]).stdout == "audit log intact: 2 entries\n")
    }

    @Test func refreshResultsAndMigrations() throws {
        #expect(try state(["record-refresh", "--result", "ok", "--at", "1700000000"] + user()).status == 0)
        #expect(try state(["check"] + user()).status == 0)
        let rejected = try state(
            ["record-refresh", "--result", "invalid_grant", "--at", "1700000100", "--json"] + user())
        #expect((try rejected.json()["applied"] as? [[String: Any]])?.first?["new"] as? String == "revoked")
        #expect(try state(["show", "--json"] + user()).json()["cause"] as? String == "refresh-invalid-grant")
        // Event times keep their milliseconds wherever they are printed.
        let exact = try state(["record-refresh", "--result", "ok", "--at", "1700000200.042"] + user())
        #expect(exact.stdout.contains("(refresh-ok at 2023-11-14T22:16:40.042Z)"), "\(exact.stdout)")
        let exactJSON = try state(["record-refresh", "--result", "ok", "--at", "1700000201.5", "--json"] + user())
        let applied = try #require((try exactJSON.json()["applied"] as? [[String: Any]])?.first)
        #expect(applied["event_time"] as? String == "2023-11-14T22:16:41.500Z")
        #expect(try state(["show", "--json"] + user()).json()["since"] as? String == "2023-11-14T22:16:41.500Z")
        #expect(try state(["history"] + user()).stdout.contains("2023-11-14T22:16:40.042Z  revoked -> authorized"))

        let moved = try state([
            "record-migration", "--client-id", Self.client, "--from", "001.old.1", "--to", "002.new.1", "--at",
            "1700000200",
        ])
        #expect(moved.status == 0, "\(moved.stderr)")
        let shown = try state(["show", "--json"] + user("001.old.1")).json()
        #expect(
            shown["state"] as? String == "transferred" && shown["raw_value"] as? Int == 3
                && shown["linked_sub"] as? String == "002.new.1")
        #expect(try state(["check"] + user("001.old.1")).status == 14)
        // A token carrying transfer_sub moves its old subject too.
        let transfer = try token(
            issuedAt: 1_700_000_300, subject: "002.other.2", extra: ["transfer_sub": "001.other.2"])
        #expect(try applyToken(transfer).status == 0)
        #expect(try state(["show", "--json"] + user("001.other.2")).json()["linked_sub"] as? String == "002.other.2")
        #expect(try state(["check"] + user("002.other.2")).status == 0)
    }

    @Test func aTamperedOrTruncatedAuditLogIsDetected() throws {
        for (index, at) in ["1700000000", "1700000100", "1700000200"].enumerated() {
            #expect(
                try state(["record-refresh", "--result", index % 2 == 0 ? "ok" : "invalid_grant", "--at", at] + user())
                    .status == 0)
        }
        let path = vault + ".audit"
        let original = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(try state(["audit", "--verify"]).status == 0)
        let exported = try state(["audit"])
        #expect(exported.stdout.split(separator: "\n").count == 3)
        let lines = original.split(separator: 0x0A)
        for damaged in [
            Data(original.dropLast(1)), Data(lines.dropLast().joined(separator: [0x0A]) + [0x0A]),
            Data(
                String(decoding: original, as: UTF8.self).replacingOccurrences(
                    of: "\"revoked\"", with: "\"authorized\""
                ).utf8),
        ] {
            try damaged.write(to: URL(fileURLWithPath: path))
            let verified = try state(["audit", "--verify", "--json"])
            #expect(verified.status == 31, "\(verified.stdout)")
            #expect((try verified.json()["error"] as? [String: Any])?["code"] as? String == "audit_log_tampered")
            // A damaged log is not extended by a transition.
            #expect(
                try state(["record-refresh", "--result", "invalid_grant", "--at", "1700000900"] + user()).status == 31)
        }
        try original.write(to: URL(fileURLWithPath: path))
        #expect(try state(["audit", "--verify"]).status == 0)
    }

    @Test func usageErrors() throws {
        #expect(try CLIRunner.run(["state", "check"] + user() + ["--vault", vault]).status == 64)
        #expect(try CLIRunner.run(["state", "show", "--client-id", Self.client] + vaultOptions).status == 64)
        #expect(try state(["record-refresh", "--result", "maybe"] + user()).status == 64)
        #expect(try state(["record-migration", "--client-id", Self.client, "--from", "a", "--to", "a"]).status == 64)
        #expect(
            try CLIRunner.run(
                [
                    "state", "apply-notification", "--jwks", jwks, "--vault", vault, "--passphrase-stdin",
                    "--client-id", Self.client,
                ], stdin: "x"
            ).status == 64)
        #expect(try state(["apply-notification", "--jwks", jwks], stdin: "{}").status == 64)
        #expect(
            try state(
                ["apply-token", "-", "--jwks", jwks, "--client-id", Self.client, "--aud", "com.other"], stdin: "x"
            ).status == 64)
        #expect(
            try CLIRunner.run(["verify-token", "--state", "--aud", Self.client, "--jwks", jwks, "x"] + vaultOptions)
                .status == 64)
        #expect(
            try CLIRunner.run(["verify-token", "--apple", "--state", "--aud", Self.client, "--jwks", jwks, "x"]).status
                == 64)
        #expect(
            try CLIRunner.run(["verify-token", "--apple", "--aud", Self.client, "--jwks", jwks, "x"] + vaultOptions)
                .status == 64)
        // A missing vault is 66, a wrong key 30.
        #expect(
            try CLIRunner.run(
                ["state", "check"] + user() + ["--vault", directory.path + "/none.skv", "--key-file", keyFile]
            ).status == 66)
        let wrongKey = try directory.write("wrong.key", String(repeating: "ab", count: 32), mode: 0o600)
        #expect(
            try CLIRunner.run(["state", "check"] + user() + ["--vault", vault, "--key-file", wrongKey]).status == 30)
    }
}

extension StateCLITests {
    /// Processes applying events at once. Run alone with `swift test --filter StateCLITests/Stress`.
    @Suite(.tags(.stress)) struct Stress {
        let fixture: StateCLITests
        init() throws { fixture = try StateCLITests() }

        @Test func concurrentProcessesLoseNoTransition() throws {
            let subjects = (0..<6).map { "001.parallel.\($0)" }
            var children: [ChildProcess] = []
            for subject in subjects {
                for (result, at) in [("ok", "1700000000"), ("invalid_grant", "1700000100")] {
                    children.append(
                        try ChildProcess(
                            CLIRunner.executable.path,
                            [
                                "state", "record-refresh", "--result", result, "--at", at, "--client-id",
                                StateCLITests.client, "--sub", subject,
                            ] + fixture.vaultOptions,
                            stdin: nil, environment: [:], currentDirectory: nil))
                }
            }
            for child in children {
                let result = try child.wait(timeout: 120)
                #expect(result.status == 0, "\(result.stderr)")
            }
            for subject in subjects {
                #expect(
                    try fixture.state(["show", "--json"] + fixture.user(subject)).json()["state"] as? String
                        == "revoked")
            }
            let audit = try fixture.state(["audit", "--verify", "--json"])
            // Each subject: notFound>authorized and authorized>revoked, or notFound>revoked when the
            // revocation is applied first (the earlier sign-in then changes nothing).
            let entries = try #require(try audit.json()["entries"] as? Int)
            #expect(entries >= subjects.count && entries <= 2 * subjects.count)
            let history = try subjects.map {
                try fixture.state(["history", "--json"] + fixture.user($0)).json()["entries"] as? [[String: Any]] ?? []
            }
            #expect(history.reduce(0) { $0 + $1.count } == entries)
            #expect(history.allSatisfy { $0.last?["new"] as? String == "revoked" })
        }
    }
}
