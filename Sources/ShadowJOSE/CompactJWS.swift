public import ShadowCore

/// A JWS in compact serialization (RFC 7515 §7.1), split and decoded but not verified.
///
/// The header is parsed; the payload stays bytes until the signature has been checked.
public struct CompactJWS: Sendable {
    /// The protected header.
    public let header: JOSEHeader
    /// The decoded payload bytes.
    public let payload: [UInt8]
    /// The decoded signature bytes.
    public let signature: [UInt8]
    /// The original token.
    public let token: String
    /// Length of `header.payload`, the bytes the signature covers.
    let signingInputLength: Int

    /// The default cap on token size, in bytes.
    public static let defaultMaxBytes = 16 * 1024

    /// Splits and decodes a compact JWS.
    ///
    /// - Parameters:
    ///   - token: `header.payload.signature`, each part unpadded base64url.
    ///   - maxBytes: tokens longer than this are refused before any decoding.
    /// - Throws: ``JOSEError/Code/malformedToken`` saying which part is wrong and how.
    public init(_ token: String, maxBytes: Int = CompactJWS.defaultMaxBytes) throws {
        var token = token
        (header, payload, signature, signingInputLength) = try token.withUTF8 { bytes in
            try Self.split(bytes, maxBytes: maxBytes)
        }
        self.token = token
    }

    private static func split(_ bytes: UnsafeBufferPointer<UInt8>, maxBytes: Int) throws -> (JOSEHeader, [UInt8], [UInt8], Int) {
        guard bytes.count <= maxBytes else {
            throw JOSEError(.malformedToken, "token is \(bytes.count) bytes; the limit is \(maxBytes)")
        }
        guard !bytes.isEmpty else { throw JOSEError(.malformedToken, "token is empty") }
        var dots: (Int, Int) = (-1, -1)
        var dotCount = 0
        for (i, byte) in bytes.enumerated() where byte == UInt8(ascii: ".") {
            if dotCount == 0 { dots.0 = i } else if dotCount == 1 { dots.1 = i }
            dotCount += 1
        }
        guard dotCount == 2 else {
            let segments = dotCount + 1
            let hint = segments == 5 ? " (five segments is a JWE, an encrypted token, which is not supported)" : ""
            throw JOSEError(.malformedToken, "token has \(segments) segment\(segments == 1 ? "" : "s"); a compact JWS has exactly 3 (header.payload.signature)\(hint)")
        }
        let headerBytes = try decode(bytes, 0..<dots.0, part: "header")
        let payload = try decode(bytes, (dots.0 + 1)..<dots.1, part: "payload")
        guard dots.1 + 1 < bytes.count else {
            throw JOSEError(.malformedToken, "signature segment is empty (an unsecured JWS is never accepted)")
        }
        let signature = try decode(bytes, (dots.1 + 1)..<bytes.count, part: "signature")
        let headerObject = try parseObject(headerBytes, part: "header")
        return (try JOSEHeader(headerObject), payload, signature, dots.1)
    }

    private static func decode(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, part: String) throws -> [UInt8] {
        do {
            return try Base64URL.decode(UnsafeBufferPointer(rebasing: bytes[range]))
        } catch {
            throw JOSEError(.malformedToken, "\(part) segment is not valid base64url: \(error)")
        }
    }

    static func parseObject(_ bytes: [UInt8], part: String) throws -> JSONObject {
        let value: JSONValue
        do {
            value = try bytes.withUnsafeBufferPointer { try StrictJSON.parse(buffer: $0, limits: .jose) }
        } catch {
            throw JOSEError(.malformedToken, "\(part) is not valid JSON: \(error)")
        }
        guard let object = value.objectValue else {
            throw JOSEError(.malformedToken, "\(part) must be a JSON object, found \(value.typeName)")
        }
        return object
    }

    /// The payload parsed as a JSON object (a JWT claims set), whether or not the signature
    /// has been checked. Only ``JWTVerifier`` output is trustworthy.
    public func unverifiedPayload() throws -> JSONObject {
        try Self.parseObject(payload, part: "payload")
    }

    /// Calls `body` with the bytes the signature covers: the ASCII `header.payload`.
    public func withSigningInput<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        var token = token
        return try token.withUTF8 { bytes in
            try body(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[0..<signingInputLength]))
        }
    }
}
