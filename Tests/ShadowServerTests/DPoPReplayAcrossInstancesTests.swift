import Crypto
import Foundation
import HTTPTypes
import ShadowApple
import ShadowCore
import ShadowDPoP
import ShadowJOSE
import ShadowPostgres
import ShadowServer
import ShadowSessions
import ShadowTestSupport
import ShadowVault
import Testing

/// Two instances of the session routes on one PostgreSQL database, and a captured request
/// (a bound access token with its proof) sent to both: DPoP's replay check where instances and
/// protected routes meet (Docs/dpop.md, "Replay").
@Suite(.tags(.postgres), .ownThreads, .enabled(if: postgresWanted)) struct DPoPReplayAcrossInstancesTests {
    static let issuer = "https://api.example.com"
    let url: String

    init() throws { url = try PostgresCluster.shared.get().freshDatabase() }

    func withInstances(_ body: (SessionEndpoints, SessionEndpoints) async throws -> Void) async throws {
        let unlock = VaultUnlock.key(SecretBytes((0..<32).map { UInt8($0) }))
        var stores: [DatabaseSessionStore] = []
        do {
            var instances: [SessionEndpoints] = []
            for _ in 0..<2 {
                let store = try await PostgresSessionStore.connect(
                    try PostgresLocation(url: url), unlock: unlock, connectTimeout: .seconds(60), retryFor: .seconds(90)
                )
                stores.append(store)
                let authority = try await SessionAuthority(
                    store: store,
                    configuration: SessionConfiguration(
                        issuer: Self.issuer, audience: Self.issuer, clientID: "com.example.app"))
                instances.append(
                    SessionEndpoints(
                        authority: authority, validator: AppleIdentityTokenValidator(clientIDs: ["com.example.app"]),
                        appleKeys: try JWKSet(keys: []), appleClients: [:]))
            }
            try await body(instances[0], instances[1])
        } catch {
            for store in stores { await store.close() }
            throw error
        }
        for store in stores { await store.close() }
    }

    static func code(_ answer: SessionHTTPResponse) -> String? {
        (try? StrictJSON.parse(answer.body).objectValue)?["error"]?.objectValue?["code"]?.stringValue
    }

    /// The request a thief captured: `GET /auth/sessions` with a bound access token and its proof.
    static func capturedRequest(
        signedInAt endpoints: SessionEndpoints
    ) async throws -> (token: String, proof: String, device: DPoPSigner) {
        let device = try DPoPSigner.es256(P256.Signing.PrivateKey())
        let issued = try await endpoints.authority.signIn(
            appleSubject: "001234.replay.0001", appleClientID: "com.example.app", appleRefreshToken: nil,
            device: "phone", keyThumbprint: device.thumbprint)
        let proof = try device.proof(
            method: "GET", url: issuer + "/auth/sessions", accessToken: issued.accessToken)
        return (issued.accessToken, proof, device)
    }

    @Test func aProofAcceptedAtAProtectedRouteIsAReplayAtTheOtherInstance() async throws {
        try await withInstances { first, second in
            let (token, proof, device) = try await Self.capturedRequest(signedInAt: first)
            let accepted = await first.sessions(authorization: "DPoP " + token, clientIP: "192.0.2.1", dpop: [proof])
            #expect(accepted.status == .ok, "\(String(decoding: accepted.body, as: UTF8.self))")
            for instance in [second, first] {
                let replayed = await instance.sessions(
                    authorization: "DPoP " + token, clientIP: "192.0.2.2", dpop: [proof])
                #expect(replayed.status == .unauthorized && Self.code(replayed) == "invalid_dpop_proof")
                #expect(String(decoding: replayed.body, as: UTF8.self).contains("replayed"))
            }
            // The owner's next request carries a new proof, and goes through at either instance.
            let next = try device.proof(method: "GET", url: Self.issuer + "/auth/sessions", accessToken: token)
            #expect(
                await second.sessions(authorization: "DPoP " + token, clientIP: "192.0.2.1", dpop: [next]).status
                    == .ok)
            // DELETE /auth/sessions/{id} is checked against the same table.
            let session = try #require(
                try StrictJSON.parse(accepted.body).objectValue?["sessions"]?.arrayValue?.first?.objectValue?["id"]?
                    .stringValue)
            let path = "/auth/sessions/" + session
            let deleteProof = try device.proof(method: "DELETE", url: Self.issuer + path, accessToken: token)
            let deleted = await first.deleteSession(
                session, authorization: "DPoP " + token, clientIP: "192.0.2.1", dpop: [deleteProof])
            #expect(deleted.status == .ok, "\(String(decoding: deleted.body, as: UTF8.self))")
            let again = await second.deleteSession(
                session, authorization: "DPoP " + token, clientIP: "192.0.2.2", dpop: [deleteProof])
            #expect(again.status == .unauthorized && Self.code(again) == "invalid_dpop_proof")
        }
    }

    /// `ProtectedRouteAccess` (what `SessionMiddleware` runs) remembers proofs in this process by
    /// default, and in the store when given the session store's cache.
    @Test func aMiddlewaresReplayCacheIsItsProcessUnlessGivenTheStore() async throws {
        try await withInstances { first, second in
            let (token, proof, _) = try await Self.capturedRequest(signedInAt: first)
            func call(_ access: ProtectedRouteAccess) async -> Bool {
                guard
                    case .success = await access.caller(
                        authorization: "DPoP " + token, dpop: [proof], method: "GET", path: "/auth/sessions")
                else { return false }
                return true
            }
            let firstMemory = ProtectedRouteAccess(authority: first.authority)
            let secondMemory = ProtectedRouteAccess(authority: second.authority)
            #expect(await call(firstMemory))
            #expect(await !call(firstMemory), "a replay to the same process")
            #expect(await call(secondMemory), "each process remembers its own proofs (the documented default)")
            let firstShared = ProtectedRouteAccess(authority: first.authority, replay: first.authority.replayCache)
            let secondShared = ProtectedRouteAccess(authority: second.authority, replay: second.authority.replayCache)
            #expect(await call(firstShared))
            #expect(await !call(secondShared), "the store's table is every instance's")
        }
    }
}
