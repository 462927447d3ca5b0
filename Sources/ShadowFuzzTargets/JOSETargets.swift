import Crypto
import Foundation
import ShadowCore
import ShadowJOSE

enum JOSETargets {
    /// RFC 7515 A.2 (RSA) and A.3 (P-256) public keys, the keys of the seed tokens.
    static let keys: JWKSet = {
        let text = #"""
            {"keys":[{"kty":"RSA","kid":"rfc7515-a2","n":"ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxH\#
            mfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-\#
            bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH\#
            7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ","e":"AQAB"},
            {"kty":"EC","crv":"P-256","kid":"rfc7515-a3","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEz\#
            Ru9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}
            """#
        guard let set = try? JWKSet(jsonText: text) else { preconditionFailure("the fuzz key set does not parse") }
        return set
    }()

    static let verifier = JWTVerifier(
        policy: ClaimPolicy(requireExpiration: false, leeway: 60, maxAge: nil), understoodCriticalHeaders: ["b64x"],
        clock: .fixed(Date(timeIntervalSince1970: 1_300_819_380)))

    /// A fixed ES256 signer (its key's scalar is 1).
    static let signer: JWSSigner = {
        guard let key = try? P256.Signing.PrivateKey(rawRepresentation: [UInt8](repeating: 0, count: 31) + [1]) else {
            preconditionFailure("the fuzz signing key")
        }
        return JWSSigner.es256(key)
    }()

    /// A token: split, header, payload, then the whole verification (keys chosen by `kid`,
    /// or the one able key without one). A payload the reader takes as claims, the signer signs
    /// (unless written compactly it is over the reader's 64 KiB), and it reads back the same.
    static let jws: FuzzTargets.Harness = { data in
        let token = String(decoding: data, as: UTF8.self)
        guard let parsed = try? CompactJWS(token) else {
            _ = try? verifier.verify(token, keys: keys)
            return
        }
        _ = parsed.header.typeMatches("JWT")
        if let claims = try? parsed.unverifiedPayload() {
            if let token = try? signer.sign(claims: claims) {
                precondition(
                    (try? CompactJWS(token, maxBytes: 1 << 20).unverifiedPayload()) == claims,
                    "signed claims read back differently")
            } else {
                precondition(
                    JSONValue.object(claims).serialized().utf8.count > 64 * 1024,
                    "the signer refused claims the reader took")
            }
        }
        if let verified = try? verifier.verify(token, keys: keys) {
            precondition(verified.key.canVerify(verified.algorithm))
            _ = verified.claims.audiences
            _ = verified.claims.expiresAt
        }
    }

    /// An `Authorization` header: a token is found only after `Bearer ` (any case), and is
    /// exactly the rest of the header; putting the scheme back in front finds it again. Whether
    /// the input's text is one `b64token` agrees with RFC 6750's grammar, read here the plain way.
    static let bearer: FuzzTargets.Harness = { data in
        let header = String(decoding: data, as: UTF8.self)
        let body = Array(header.utf8).reversed().drop { $0 == UInt8(ascii: "=") }
        let grammar =
            !body.isEmpty
            && body.allSatisfy { byte in
                byte < 0x80
                    && (Character(Unicode.Scalar(byte)).isLetter || Character(Unicode.Scalar(byte)).isNumber
                        || "-._~+/".utf8.contains(byte))
            }
        precondition(BearerToken.isToken68(header) == grammar)
        if let token = BearerToken.from(header: header) {
            let bytes = Array(header.utf8)
            precondition(bytes.count > 7 && String(decoding: bytes[..<7], as: UTF8.self).lowercased() == "bearer ")
            precondition(Array(token.utf8) == Array(bytes[7...]))
            precondition(BearerToken.from(header: "Bearer " + token) == token)
            _ = try? CompactJWS(token)
        } else {
            precondition(!header.utf8.starts(with: "Bearer ".utf8) || header.utf8.count == 7)
        }
    }

    /// A key file (`KeyFiles`: PEM or JWK, private or public). A PEM file is read only when it
    /// is ASCII; a private key it reads signs a token that its own public key set verifies, under
    /// the `kid` both name.
    static let keyFile: FuzzTargets.Harness = { data in
        let bytes = Array(data)
        let set = try? KeyFiles.publicKeySet(bytes)
        let signer = try? KeyFiles.signer(bytes)
        if set != nil || signer != nil, bytes.first(where: { $0 > 0x20 }) == UInt8(ascii: "-") {
            precondition(bytes.allSatisfy { $0 < 0x80 }, "a PEM key file that is not ASCII was read")
        }
        guard let signer else { return }
        guard let set, let keys = try? JWKSet(jsonText: JSONValue.object(set).serialized()), keys.keys.count == 1,
            let token = try? signer.sign(claims: ["sub": "fuzz"]),
            (try? keyFileVerifier.verify(token, keys: keys)) != nil
        else { preconditionFailure("a private key file's token does not verify under its public key set") }
    }

    static let keyFileVerifier = JWTVerifier(policy: ClaimPolicy(requireExpiration: false, leeway: 0, maxAge: nil))

    /// One JWK: what is accepted has a canonical form that reads back to the same key.
    static let jwk: FuzzTargets.Harness = { data in
        guard let key = try? JWK(jsonText: String(decoding: data, as: UTF8.self)) else { return }
        guard let again = try? JWK(json: key.json) else {
            preconditionFailure("a JWK's canonical form does not read back")
        }
        precondition(again.thumbprint == key.thumbprint && again.json == key.json && again.keyType == key.keyType)
        for algorithm in JWSAlgorithm.allCases {
            precondition(key.canVerify(algorithm) == (key.refusal(for: algorithm) == nil))
        }
    }

    /// A JWK Set: its usable keys, written as a set, read back the same, with nothing skipped.
    static let jwks: FuzzTargets.Harness = { data in
        guard let set = try? JWKSet(json: UnsafeRawBufferPointer(data).bindMemory(to: UInt8.self)) else { return }
        guard let again = try? JWKSet(jsonText: set.json.serialized()) else {
            preconditionFailure("a key set's usable keys do not read back")
        }
        precondition(again.keys.map(\.thumbprint) == set.keys.map(\.thumbprint) && again.skipped.isEmpty)
        for key in set.keys {
            if let kid = key.keyID { precondition(set.contains(keyID: kid)) }
        }
        for algorithm in JWSAlgorithm.allCases {
            _ = try? set.key(for: nil, algorithm: algorithm)
            if let kid = set.skipped.first?.keyID { _ = try? set.key(for: kid, algorithm: algorithm) }
        }
    }
}
