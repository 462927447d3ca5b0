public import ShadowCore

/// The error ShadowDPoP throws. Equal by code.
public typealias DPoPError = ModuleError<DPoPErrorCode>

/// The codes of `DPoPError`, one for each check of RFC 9449 §4.3 (Docs/dpop.md, "Checks"). New
/// codes may be added; switch with a `default`.
public struct DPoPErrorCode: ShadowKeysErrorCode {
    public let name: String
    private init(_ name: String) { self.name = name }

    /// No `DPoP` header, where one is required.
    public static let missingProof = DPoPErrorCode("missing_proof")
    /// More than one `DPoP` header (§4.3, step 1).
    public static let multipleProofs = DPoPErrorCode("multiple_proofs")
    /// Not a compact JWS of JSON objects within the size cap, or a header or claim of the wrong
    /// type (§4.3, step 2).
    public static let malformedProof = DPoPErrorCode("malformed_proof")
    /// `typ` is not `dpop+jwt` (§4.3, step 4).
    public static let wrongType = DPoPErrorCode("wrong_type")
    /// `alg` is `none`, an HMAC algorithm, or not on the allowed list (§4.3, step 5).
    public static let disallowedAlgorithm = DPoPErrorCode("disallowed_algorithm")
    /// `jwk` is missing, malformed, holds private members, is outside the accepted key sizes, or
    /// cannot verify `alg` (§4.3, steps 5 and 7).
    public static let invalidKey = DPoPErrorCode("invalid_key")
    /// The header lists a `crit` extension this verifier does not understand.
    public static let unsupportedCriticalHeader = DPoPErrorCode("unsupported_critical_header")
    /// The signature does not verify under the header's `jwk` (§4.3, step 6).
    public static let invalidSignature = DPoPErrorCode("invalid_signature")
    /// `jti`, `htm`, `htu` or `iat` is missing, or `ath` where an access token is presented
    /// (§4.3, step 3).
    public static let missingClaim = DPoPErrorCode("missing_claim")
    /// `htm` is not the request's method (§4.3, step 8).
    public static let methodMismatch = DPoPErrorCode("method_mismatch")
    /// `htu` is not the request's URI, compared after normalization (§4.3, step 9).
    public static let uriMismatch = DPoPErrorCode("uri_mismatch")
    /// `iat` is older than the accepted age, or later than now plus the leeway (§4.3, step 11).
    public static let iatOutOfWindow = DPoPErrorCode("iat_out_of_window")
    /// `ath` is not the hash of the access token presented with the proof (§4.3, step 12).
    public static let athMismatch = DPoPErrorCode("ath_mismatch")
    /// The proof's key is not the one the token is bound to (§4.3, step 12).
    public static let keyMismatch = DPoPErrorCode("key_mismatch")
    /// The proof's `jti` was seen before within its window (§11.1).
    public static let replayed = DPoPErrorCode("replayed")
    /// The server requires a nonce, and the proof has none or an old one (§8, `use_dpop_nonce`).
    public static let useNonce = DPoPErrorCode("use_dpop_nonce")
    /// A setting or argument is out of range (a method, a URI or a nonce a proof cannot carry).
    public static let invalidParameter = DPoPErrorCode("invalid_parameter")
    /// The replay cache could not be read or written now; try again later.
    public static let unavailable = DPoPErrorCode("store_unavailable")
}

/// The form of a `jkt`: an RFC 7638 SHA-256 thumbprint, 43 base64url characters of 32 bytes.
package enum DPoPThumbprint {
    /// The thumbprint's 32 bytes, or nil when `text` is not one.
    package static func bytes(_ text: String) -> [UInt8]? {
        guard text.utf8.count == 43, let bytes = try? Base64URL.decode(text), bytes.count == 32 else { return nil }
        return bytes
    }
}
