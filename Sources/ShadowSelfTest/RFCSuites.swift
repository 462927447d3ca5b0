import Crypto
import CryptoExtras
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowDPoP
import ShadowJOSE

/// Known answers printed in RFCs, run through the public API.
package enum RFCSuites {
    /// RFC 4648 §10 test vectors (base64; identical in the URL-safe alphabet for these inputs).
    package static func base64() -> [VectorCase] {
        let vectors = [
            ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"),
            ("foobar", "Zm9vYmFy"),
        ]
        return vectors.map { input, encoded in
            let roundTrip = (try? Base64URL.decode(encoded)).map { String(decoding: $0, as: UTF8.self) }
            let passed = Base64URL.encode(Array(input.utf8)) == encoded && roundTrip == input
            return VectorCase(
                id: "BASE64(\"\(input)\")", passed: passed,
                detail: "BASE64(\"\(input)\") should be \"\(encoded)\" both ways")
        }
    }

    /// RFC 7515 A.2: the RS256 example verifies, its claims read back, and signing the same
    /// input with the RFC's private key reproduces the RFC's (deterministic) signature.
    package static func rfc7515A2(_ text: String) -> [VectorCase] {
        checks { add in
            let file = try object(text)
            let (jwk, token, claims, at) = try example(file)
            add(
                "verify", try verify(token, jwk, at)?.json == claims,
                "the RFC token verifies at \(at) with the RFC claims")
            add("expired", expired(token, jwk), "the RFC token is rejected as expired after exp")
            let tampered = flipLastSignatureCharacter(token)
            add("tampered", rejects(tampered, jwk, at, code: .invalidSignature), "a changed signature is rejected")

            guard let priv = file["privateJwk"]?.objectValue else { throw VectorFormatError("no privateJwk") }
            func part(_ name: String) throws -> [UInt8] { try Base64URL.decode(priv[name]?.stringValue ?? "") }
            let key = try _RSA.Signing.PrivateKey(
                n: try part("n"), e: try part("e"), d: try part("d"), p: try part("p"), q: try part("q"))
            let jws = try CompactJWS(token)
            let resigned = try JWSSigner.rs256(key).sign(payload: Array(jws.payload))
            add("sign", resigned == token, "RS256 signing of the RFC input reproduces the RFC token byte for byte")
        }
    }

    /// RFC 7515 A.3: the ES256 example verifies, its private scalar matches its public key, and
    /// our ES256 signer's output verifies under it.
    package static func rfc7515A3(_ text: String) -> [VectorCase] {
        checks { add in
            let file = try object(text)
            let (jwk, token, claims, at) = try example(file)
            add(
                "verify", try verify(token, jwk, at)?.json == claims,
                "the RFC token verifies at \(at) with the RFC claims")
            add("expired", expired(token, jwk), "the RFC token is rejected as expired after exp")
            add(
                "tampered", rejects(flipLastSignatureCharacter(token), jwk, at, code: .invalidSignature),
                "a changed signature is rejected")

            let scalar = try Base64URL.decode(file["privateScalar"]?.stringValue ?? "")
            let key = try P256.Signing.PrivateKey(rawRepresentation: scalar)
            add(
                "public key", try JWK(p256: key.publicKey, algorithm: nil, use: nil).thumbprint == jwk.thumbprint,
                "the RFC private scalar yields the RFC public key")
            let signed = try JWSSigner.es256(key).sign(claims: ["iss": "joe", "exp": 1_300_819_380])
            add("sign", try verify(signed, jwk, at) != nil, "an ES256 token signed with the RFC key verifies")
        }
    }

    /// RFC 7638 §3.1: the example JWK's thumbprint.
    package static func rfc7638(_ text: String) -> [VectorCase] {
        checks { add in
            let file = try object(text)
            guard let jwk = file["jwk"]?.objectValue, let expected = file["thumbprint"]?.stringValue else {
                throw VectorFormatError("no jwk/thumbprint")
            }
            let actual = try JWK(json: jwk).thumbprint
            add("thumbprint", actual == expected, "thumbprint should be \(expected), got \(actual)")
        }
    }

    /// RFC 9449 Figures 4, 6 and 12: each proof verifies for its request at its `iat` with the
    /// RFC's key thumbprint (and Figure 12's `ath` for its access token), and is refused for
    /// another method, later than its window, or with a changed signature.
    package static func rfc9449(_ text: String) -> [VectorCase] {
        checks { add in
            let file = try object(text)
            guard let thumbprint = file["thumbprint"]?.stringValue, let cases = file["cases"]?.arrayValue,
                !cases.isEmpty
            else { throw VectorFormatError("no thumbprint/cases") }
            for value in cases {
                guard let example = value.objectValue, let figure = example["figure"]?.stringValue,
                    let proof = example["proof"]?.stringValue, let method = example["method"]?.stringValue,
                    let url = example["url"]?.stringValue, let iat = example["iat"]?.numberValue?.int64Value
                else { throw VectorFormatError("a malformed case") }
                let token = example["accessToken"]?.stringValue
                func verifier(at seconds: Int64) -> DPoPVerifier {
                    DPoPVerifier(clock: .fixed(Date(timeIntervalSince1970: TimeInterval(seconds))))
                }
                let verified = try? verifier(at: iat).verify(
                    [proof], method: method, url: url, accessToken: token, boundTo: thumbprint)
                add(figure, verified?.thumbprint == thumbprint, "\(figure) verifies for \(method) \(url) at \(iat)")
                let other = method == "GET" ? "POST" : "GET"
                add(
                    figure + " method",
                    refuses(.methodMismatch) {
                        try verifier(at: iat).verify([proof], method: other, url: url, accessToken: token)
                    },
                    "\(figure) is refused for \(other)")
                add(
                    figure + " window",
                    refuses(.iatOutOfWindow) {
                        try verifier(at: iat + 3600).verify([proof], method: method, url: url, accessToken: token)
                    },
                    "\(figure) is refused an hour later")
                add(
                    figure + " tampered",
                    refuses(.invalidSignature) {
                        try verifier(at: iat).verify(
                            [flipLastSignatureCharacter(proof)], method: method, url: url, accessToken: token)
                    }, "\(figure) with a changed signature is refused")
            }
        }
    }

    private static func refuses(_ code: DPoPErrorCode, _ body: () throws -> DPoPProof) -> Bool {
        do {
            _ = try body()
            return false
        } catch let error as DPoPError {
            return error.code == code
        } catch {
            return false
        }
    }

    // MARK: - Helpers

    private static func checks(_ body: (_ add: (String, Bool, String) -> Void) throws -> Void) -> [VectorCase] {
        var cases: [VectorCase] = []
        do {
            try body { id, passed, detail in cases.append(VectorCase(id: id, passed: passed, detail: detail)) }
        } catch {
            cases.append(VectorCase(id: "load", passed: false, detail: "could not run: \(error)"))
        }
        return cases
    }

    private static func object(_ text: String) throws -> JSONObject {
        guard let object = try StrictJSON.parse(text).objectValue else { throw VectorFormatError("not a JSON object") }
        return object
    }

    private static func example(_ file: JSONObject) throws -> (JWK, String, JSONObject, Double) {
        guard let jwk = file["publicJwk"]?.objectValue, let token = file["token"]?.stringValue,
            let claims = file["claims"]?.objectValue, let at = file["verifyAt"]?.numberValue?.doubleValue
        else { throw VectorFormatError("example file lacks publicJwk/token/claims/verifyAt") }
        return (try JWK(json: jwk), token, claims, at)
    }

    private static func verifier(at time: Double) -> JWTVerifier {
        JWTVerifier(clock: .fixed(Date(timeIntervalSince1970: time)))
    }

    private static func verify(_ token: String, _ jwk: JWK, _ at: Double) throws -> JWTClaims? {
        try? verifier(at: at).verify(token, keys: JWKSet(keys: [jwk])).claims
    }

    private static func rejects(_ token: String, _ jwk: JWK, _ at: Double, code: JOSEError.Code) -> Bool {
        do {
            _ = try verifier(at: at).verify(token, keys: JWKSet(keys: [jwk]))
            return false
        } catch let error as JOSEError {
            return error.code == code
        } catch {
            return false
        }
    }

    private static func expired(_ token: String, _ jwk: JWK) -> Bool {
        rejects(token, jwk, 1_300_819_380 + 60, code: .claimsRejected)
    }

    private static func flipLastSignatureCharacter(_ token: String) -> String {
        var bytes = Array(token.utf8)
        // Swap between two letters whose low bits differ; keeps the encoding canonical for A-Z.
        bytes[bytes.count - 2] = bytes[bytes.count - 2] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        return String(decoding: bytes, as: UTF8.self)
    }
}
