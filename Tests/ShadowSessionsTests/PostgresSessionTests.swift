import Foundation
import ShadowCore
import ShadowJOSE
import ShadowPostgres
import ShadowSessions
import ShadowTestSupport
import ShadowVault
import Testing

/// Two instances on one PostgreSQL: the refresh race across them, rate limits that hold across
/// them, and a key rotated on one that the other verifies.
@Suite(.tags(.postgres), .ownThreads, .enabled(if: postgresWanted)) struct PostgresSessionTests {
    let url: String
    let configuration = SessionConfiguration(
        issuer: "https://api.example.com", audience: "https://api.example.com/v1", clientID: "com.example.app")

    init() throws { url = try PostgresCluster.shared.get().freshDatabase() }

    func withInstances(_ body: (SessionAuthority, SessionAuthority) async throws -> Void) async throws {
        let unlock = VaultUnlock.key(SecretBytes((0..<32).map { UInt8($0) }))
        let stores = [
            try await PostgresSessionStore.connect(
                try PostgresLocation(url: url), unlock: unlock, connectTimeout: .seconds(60), retryFor: .seconds(90)),
            try await PostgresSessionStore.connect(
                try PostgresLocation(url: url), unlock: unlock, connectTimeout: .seconds(60), retryFor: .seconds(90)),
        ]
        do {
            let first = try await SessionAuthority(store: stores[0], configuration: configuration)
            let second = try await SessionAuthority(store: stores[1], configuration: configuration)
            try await body(first, second)
        } catch {
            for store in stores { await store.close() }
            throw error
        }
        for store in stores { await store.close() }
    }

    @Test func theRefreshRaceAcrossTwoInstancesMakesOneSuccessor() async throws {
        try await withInstances { first, second in
            for round in 0..<10 {
                let issued = try await first.signIn(
                    appleSubject: "racer-\(round)", appleClientID: "com.example.app", appleRefreshToken: nil,
                    device: "phone")
                let results = try await withThrowingTaskGroup(of: String.self) { group in
                    for index in 0..<12 {
                        let instance = index % 2 == 0 ? first : second
                        group.addTask { try await instance.refresh(issued.refreshToken).refreshToken }
                    }
                    return try await group.reduce(into: Set<String>()) { $0.insert($1) }
                }
                #expect(results.count == 1, "round \(round): \(results.count) successors")
                // The one successor works on either instance.
                #expect(try await second.refresh(results.first!).session == issued.session)
            }
            // Both instances sign with the one ring, and each verifies the other's tokens.
            let token = try await first.signIn(
                appleSubject: "v", appleClientID: "com.example.app", appleRefreshToken: nil, device: "d")
            #expect(try await second.verifier().verify(token.accessToken).userID == token.userID)
        }
    }

    @Test func rateLimitsHoldAcrossInstances() async throws {
        try await withInstances { first, second in
            let limit = try RateLimit(requests: 10, per: 60)
            var allowed = 0
            for index in 0..<30 {
                let instance = index % 2 == 0 ? first : second
                if try await instance.admit("ip:198.51.100.7", limit: limit) == nil { allowed += 1 }
            }
            #expect(allowed == 10, "one limit over both instances, not one each")
        }
    }

    @Test func revocationOnOneInstanceHoldsOnTheOther() async throws {
        try await withInstances { first, second in
            let issued = try await first.signIn(
                appleSubject: "r", appleClientID: "com.example.app", appleRefreshToken: nil, device: "d")
            #expect(try await second.revokeAll(user: issued.userID) == 1)
            await #expect(throws: SessionError(.invalidGrant, "")) { try await first.refresh(issued.refreshToken) }
        }
    }
}
