import Crypto
import Foundation
import ShadowCore
import ShadowJOSE
import ShadowTestSupport
import Synchronization
import Testing

@testable import ShadowDPoP

/// A replay cache that counts its writes: a refused proof must leave it untouched.
final class CountingReplayCache: DPoPReplayCache {
    let inner = DPoPMemoryReplayCache()
    let writes = Mutex(0)

    func firstUse(of key: [UInt8], until expiresAt: Int64, now: Int64) async throws -> Bool {
        writes.withLock { $0 += 1 }
        return try await inner.firstUse(of: key, until: expiresAt, now: now)
    }

    var count: Int { writes.withLock { $0 } }
}

func clock(at seconds: Int64) -> WallClock { WallClock { Date(timeIntervalSince1970: TimeInterval(seconds)) } }

/// RFC 9449's own examples (TestVectors/rfc/rfc9449-dpop.json).
@Suite struct RFC9449ExampleTests {
    struct Example: Sendable, CustomTestStringConvertible {
        let figure: String, proof: String, method: String, url: String, iat: Int64, accessToken: String?
        var testDescription: String { figure }
    }

    static let document: JSONObject = {
        (try? StrictJSON.parse(PackagePaths.vector("rfc/rfc9449-dpop.json")).objectValue) ?? [:]
    }()

    static let examples: [Example] = (document["cases"]?.arrayValue ?? []).compactMap { value in
        guard let object = value.objectValue, let figure = object["figure"]?.stringValue,
            let proof = object["proof"]?.stringValue, let method = object["method"]?.stringValue,
            let url = object["url"]?.stringValue, let iat = object["iat"]?.numberValue?.int64Value
        else { return nil }
        return Example(
            figure: figure, proof: proof, method: method, url: url, iat: iat,
            accessToken: object["accessToken"]?.stringValue)
    }

    @Test func theFileHoldsThreeExamples() {
        #expect(Self.examples.count == 3)
    }

    @Test(arguments: examples)
    func verifies(_ example: Example) throws {
        let verifier = DPoPVerifier(clock: clock(at: example.iat + 5))
        let proof = try verifier.verify(
            [example.proof], method: example.method, url: example.url, accessToken: example.accessToken,
            boundTo: Self.document["thumbprint"]?.stringValue)
        #expect(proof.thumbprint == "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I")
        #expect(proof.method == example.method)
        #expect(proof.issuedAt == Date(timeIntervalSince1970: TimeInterval(example.iat)))
    }

    @Test(arguments: examples)
    func isRefusedAnHourLater(_ example: Example) throws {
        let verifier = DPoPVerifier(clock: clock(at: example.iat + 3600))
        #expect(throws: DPoPError(.iatOutOfWindow, "")) {
            try verifier.verify(
                [example.proof], method: example.method, url: example.url, accessToken: example.accessToken)
        }
    }
}

/// TestVectors/shadow/dpop/vectors.json, made by an independent implementation from Docs/dpop.md.
@Suite struct DPoPShadowVectorTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String, headers: [String], method: String, url: String, now: Int64, nonceRequired: Bool
        let accessToken: String?, boundTo: String?, valid: Bool, error: String?, thumbprint: String?
        var testDescription: String { name }
    }

    static let document: JSONObject = {
        (try? StrictJSON.parse(PackagePaths.vector("shadow/dpop/vectors.json")).objectValue) ?? [:]
    }()

    static let cases: [Case] = (document["cases"]?.arrayValue ?? []).compactMap { value in
        guard let object = value.objectValue, let name = object["name"]?.stringValue,
            let headers = object["headers"]?.arrayValue?.compactMap(\.stringValue),
            let method = object["method"]?.stringValue, let url = object["url"]?.stringValue,
            let now = object["now"]?.numberValue?.int64Value, let valid = object["valid"]?.boolValue
        else { return nil }
        return Case(
            name: name, headers: headers, method: method, url: url, now: now,
            nonceRequired: object["nonceRequired"]?.boolValue ?? false, accessToken: object["accessToken"]?.stringValue,
            boundTo: object["boundTo"]?.stringValue, valid: valid, error: object["error"]?.stringValue,
            thumbprint: object["thumbprint"]?.stringValue)
    }

    @Test func everyErrorCodeHasACase() {
        #expect(Self.cases.count >= 50)
        let codes = Set(Self.cases.compactMap(\.error))
        for code: DPoPErrorCode in [
            .missingProof, .multipleProofs, .malformedProof, .wrongType, .disallowedAlgorithm, .invalidKey,
            .unsupportedCriticalHeader, .invalidSignature, .missingClaim, .methodMismatch, .uriMismatch,
            .iatOutOfWindow, .athMismatch, .keyMismatch, .useNonce,
        ] {
            #expect(codes.contains(code.name), "no vector for \(code.name)")
        }
    }

    @Test(arguments: cases)
    func verdict(_ vector: Case) async throws {
        let settings = try #require(Self.document["settings"]?.objectValue)
        let verifier = DPoPVerifier(
            maxAge: try #require(settings["maxAge"]?.numberValue?.doubleValue),
            leeway: try #require(settings["leeway"]?.numberValue?.doubleValue), clock: clock(at: vector.now))
        var nonces: DPoPNonces?
        if vector.nonceRequired {
            let configuration = try #require(Self.document["nonces"]?.objectValue)
            let key = try #require(configuration["key"]?.stringValue.flatMap { try? Hex.decode($0) })
            nonces = try DPoPNonces(
                key: SymmetricKey(data: key), period: try #require(configuration["period"]?.numberValue?.int64Value),
                clock: clock(at: vector.now))
        }
        let replay = CountingReplayCache()
        do {
            let proof = try await verifier.verify(
                vector.headers, method: vector.method, url: vector.url, accessToken: vector.accessToken,
                boundTo: vector.boundTo, nonces: nonces, replay: replay)
            #expect(vector.valid, "accepted; expected \(vector.error ?? "")")
            #expect(proof.thumbprint == vector.thumbprint)
            #expect(replay.count == 1)
        } catch let error as DPoPError {
            #expect(!vector.valid, "refused: \(error.codeName): \(error.reason)")
            #expect(error.codeName == vector.error, "\(error.reason)")
            #expect(replay.count == 0, "a refused proof wrote to the replay cache")
        }
    }

    /// The replay key, byte for byte.
    @Test func replayKey() throws {
        let vector = try #require(Self.document["replay"]?.objectValue)
        let key = try JWK(
            jsonText: #"{"kty":"EC","crv":"P-256","x":"l8tFrhx-34tV3hRICRDY9zCkDlpBhF42UQUfWVAWBFs","#
                + #""y":"9VE4jf_Ok_o64zbTTlcuNJajHmt6v9TDVrU0CdvGRDA"}"#)
        let proof = DPoPProof(
            thumbprint: try #require(vector["thumbprint"]?.stringValue), key: key, algorithm: .es256,
            id: try #require(vector["jti"]?.stringValue), method: "POST",
            targetURI: try #require(vector["htu"]?.stringValue), issuedAt: Date(), nonce: nil, acceptedUntil: Date())
        #expect(Hex.encode(proof.replayKey) == vector["key"]?.stringValue)
    }
}

extension DPoPShadowVectorTests {
    /// One verifier for every case, twice over: headers checked once are taken from its cache
    /// the second time, and every verdict stays the same.
    @Test func verdictsAreTheSameWithAWarmHeaderCache() throws {
        let nonces = try #require(Self.document["nonces"]?.objectValue)
        let key = try Hex.decode(try #require(nonces["key"]?.stringValue))
        var shared = DPoPVerifier(maxAge: 60, leeway: 10, clock: clock(at: 1_700_000_000))
        func verdict(_ vector: Case, _ verifier: DPoPVerifier) throws -> String {
            let nonceSource =
                vector.nonceRequired
                ? try DPoPNonces(key: SymmetricKey(data: key), period: 300, clock: clock(at: vector.now)) : nil
            do {
                _ = try verifier.verify(
                    vector.headers, method: vector.method, url: vector.url, accessToken: vector.accessToken,
                    boundTo: vector.boundTo, nonces: nonceSource)
                return "valid"
            } catch let error as DPoPError {
                return error.codeName
            }
        }
        for pass in 0..<2 {
            for vector in Self.cases {
                shared.clock = clock(at: vector.now)
                #expect(
                    try verdict(vector, shared) == (vector.valid ? "valid" : vector.error),
                    "pass \(pass): \(vector.name)")
            }
        }
        // A header cached under ES256 is refused by a copy that allows RS256 only.
        var strict = shared
        strict.algorithms = [.rs256]
        let accepted = try #require(Self.cases.first { $0.valid && $0.name == "ES256 token request" })
        strict.clock = clock(at: accepted.now)
        #expect(try verdict(accepted, strict) == "disallowed_algorithm")
    }
}
