import Crypto
import Foundation
import ShadowCore
import ShadowDPoP
import ShadowPostgres
import ShadowSQLite
import ShadowSessions
import ShadowStorage
import ShadowTestSupport
import ShadowVault
import Testing

/// Sessions bound to a DPoP key, over both engines (Docs/dpop.md, "Sessions"): the binding in the
/// row and its MAC, the refresh rules, the replay table shared by instances.
@Suite(.ownThreads) struct DPoPBindingTests {
    static let engines = SessionStoreConformanceTests.engines
    let conformance = SessionStoreConformanceTests()
    let url = "https://api.example.com/auth/refresh"

    /// A proof for a refresh, by `signer`, checked as the session routes check it (no replay check).
    func proof(_ signer: DPoPSigner) throws -> DPoPProof {
        try DPoPVerifier().verify([try signer.proof(method: "POST", url: url)], method: "POST", url: url)
    }

    func bound(_ authority: SessionAuthority, _ signer: DPoPSigner) async throws -> IssuedTokens {
        try await authority.signIn(
            appleSubject: "001234.bound.0042", appleClientID: "com.example.app", appleRefreshToken: nil,
            device: "iPhone", keyThumbprint: signer.thumbprint)
    }

    @Test(arguments: engines) func aBoundSessionsTokensConfirmItsKey(engine: String) async throws {
        let fixture = try await conformance.fixture(engine)
        try await closing({ await fixture.store.close() }) {
            let authority = try await SessionAuthority(store: fixture.store, configuration: conformance.configuration)
            let device = try DPoPSigner.es256(P256.Signing.PrivateKey())
            let issued = try await bound(authority, device)
            #expect(issued.tokenType == "DPoP")
            #expect(try await authority.verifier().verify(issued.accessToken).keyThumbprint == device.thumbprint)
            let refreshed = try await authority.refresh(issued.refreshToken, proof: try proof(device))
            #expect(refreshed.tokenType == "DPoP" && refreshed.session == issued.session)
            #expect(try await authority.sessions(user: issued.userID).first?.keyThumbprint == device.thumbprint)
            // A session without DPoP stays a bearer session, a proof or not.
            let plain = try await conformance.signIn(authority, "001234.plain.0042")
            #expect(plain.tokenType == "Bearer")
            #expect(try await authority.verifier().verify(plain.accessToken).keyThumbprint == nil)
            #expect(try await authority.refresh(plain.refreshToken, proof: try proof(device)).tokenType == "Bearer")
        }
    }

    /// The stolen refresh token: without the key, or with the thief's key, it is refused before
    /// anything else, and the session neither rotates nor is revoked as a reuse.
    @Test(arguments: engines) func aStolenRefreshTokenIsRefusedAndChangesNothing(engine: String) async throws {
        let fixture = try await conformance.fixture(engine)
        try await closing({ await fixture.store.close() }) {
            var settings = conformance.configuration
            settings.grace = 0
            let authority = try await SessionAuthority(store: fixture.store, configuration: settings)
            let device = try DPoPSigner.es256(P256.Signing.PrivateKey())
            let thief = try DPoPSigner.es256(P256.Signing.PrivateKey())
            let first = try await bound(authority, device)
            let current = try await authority.refresh(first.refreshToken, proof: try proof(device))
            let before = try #require(try await authority.sessions(user: first.userID).first)
            for (token, stolenProof) in [
                (current.refreshToken, nil), (current.refreshToken, try proof(thief)),
                // An old generation would revoke the session as a reuse; without the key it may not.
                (first.refreshToken, nil), (first.refreshToken, try proof(thief)),
            ] as [(String, DPoPProof?)] {
                let error = await #expect(throws: SessionError.self) {
                    _ = try await authority.refresh(token, proof: stolenProof)
                }
                #expect(error?.code == .invalidProof, "\(String(describing: error))")
            }
            let after = try #require(try await authority.sessions(user: first.userID).first)
            #expect(after.generation == before.generation && after.revokedAt == nil)
            #expect(after.lastUsedAt == before.lastUsedAt)
            // The device itself still refreshes.
            #expect(
                try await authority.refresh(current.refreshToken, proof: try proof(device)).session == first.session)
        }
    }

    @Test(arguments: engines) func requiringDPoPRefusesSessionsWithoutAKey(engine: String) async throws {
        let fixture = try await conformance.fixture(engine)
        try await closing({ await fixture.store.close() }) {
            let open = try await SessionAuthority(store: fixture.store, configuration: conformance.configuration)
            let old = try await conformance.signIn(open, "001234.old.0042")
            var settings = conformance.configuration
            settings.requireDPoP = true
            let strict = try await SessionAuthority(store: fixture.store, configuration: settings)
            let device = try DPoPSigner.es256(P256.Signing.PrivateKey())
            for attempt in 0..<2 {
                let error = await #expect(throws: SessionError.self) {
                    if attempt == 0 {
                        _ = try await conformance.signIn(strict, "001234.new.0042")
                    } else {
                        _ = try await strict.refresh(old.refreshToken, proof: try proof(device))
                    }
                }
                #expect(error?.code == .invalidProof)
            }
            #expect(try await bound(strict, device).tokenType == "DPoP")
        }
    }

    /// The binding is in the row's MAC: a key swapped or removed by someone who can write rows is
    /// `sessions_corrupted`, and nothing is issued.
    @Test(arguments: engines) func theRowMACCoversTheKey(engine: String) async throws {
        let blob =
            engine == "sqlite"
            ? "x'" + String(repeating: "11", count: 32) + "'"
            : "'\\x"
                + String(
                    repeating: "11", count: 32) + "'"
        for edit in ["UPDATE shadow_sessions SET jkt = NULL", "UPDATE shadow_sessions SET jkt = \(blob)"] {
            let fixture = try await conformance.fixture(engine)
            try await closing({ await fixture.store.close() }) {
                let authority = try await SessionAuthority(
                    store: fixture.store, configuration: conformance.configuration)
                let device = try DPoPSigner.es256(P256.Signing.PrivateKey())
                let issued = try await bound(authority, device)
                try await fixture.sql(edit)
                let error = await #expect(throws: SessionError.self) {
                    _ = try await authority.refresh(issued.refreshToken, proof: try proof(device))
                }
                #expect(error?.code == .corrupted, "\(engine): \(edit): \(String(describing: error))")
            }
        }
    }

    /// The replay table: a key is taken once until it expires, and the sweep removes it after.
    @Test(arguments: engines) func aProofKeyIsTakenOnceUntilItExpires(engine: String) async throws {
        let fixture = try await conformance.fixture(engine)
        try await closing({ await fixture.store.close() }) {
            let key = Array(repeating: UInt8(7), count: 16)
            #expect(try await fixture.store.firstUse(of: key, until: 2_000, now: 1_000))
            #expect(try await !fixture.store.firstUse(of: key, until: 3_000, now: 1_999))
            #expect(try await fixture.store.firstUse(of: key, until: 4_000, now: 2_001))
            #expect(try await !fixture.store.firstUse(of: key, until: 5_000, now: 3_000))
            let (swept, next) = try await fixture.store.deleteDead(
                expiredBefore: 4_001, idleBefore: 0, examining: 100, from: SweepPosition())
            #expect(swept.proofs == 1)
            #expect(next.isFinished, "one table of one row: examined to its end")
            #expect(try await fixture.store.firstUse(of: key, until: 5_000, now: 1_000))
        }
    }
}

/// Two instances on one PostgreSQL: a proof one accepted, the other refuses.
@Suite(.tags(.postgres), .ownThreads, .enabled(if: postgresWanted)) struct DPoPAcrossInstancesTests {
    @Test func aProofReplayedToASecondInstanceIsRefused() async throws {
        let url = try PostgresCluster.shared.get().freshDatabase()
        let unlock = VaultUnlock.key(SecretBytes((0..<32).map { UInt8($0) }))
        let first = try await PostgresSessionStore.connect(try PostgresLocation(url: url), unlock: unlock)
        let second = try await PostgresSessionStore.connect(try PostgresLocation(url: url), unlock: unlock)
        try await closing({
            await first.close()
            await second.close()
        }) {
            let signer = try DPoPSigner.es256(P256.Signing.PrivateKey())
            let target = "https://api.example.com/auth/refresh"
            let proof = try signer.proof(method: "POST", url: target)
            let verifier = DPoPVerifier()
            _ = try await verifier.verify([proof], method: "POST", url: target, replay: first)
            await #expect(throws: DPoPError(.replayed, "")) {
                _ = try await verifier.verify([proof], method: "POST", url: target, replay: second)
            }
            // A fresh proof by the same key is no replay.
            _ = try await verifier.verify(
                [try signer.proof(method: "POST", url: target)], method: "POST", url: target, replay: second)
        }
    }
}
