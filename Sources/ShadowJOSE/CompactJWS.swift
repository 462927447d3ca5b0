public import ShadowCore
#if canImport(Darwin)
import Darwin
#else
import Glibc
#endif

/// A JWS in compact serialization (RFC 7515 §7.1), split and decoded but not verified.
///
/// The header is parsed; the payload stays bytes until the signature has been checked.
public struct CompactJWS: Sendable {
    /// The protected header.
    public let header: JOSEHeader
    /// The original token.
    public let token: String
    /// The decoded payload, then the decoded signature, in one buffer.
    private let decoded: [UInt8]
    private let payloadCount: Int
    /// Length of `header.payload`, the bytes the signature covers.
    let signingInputLength: Int

    /// The decoded payload bytes.
    public var payload: ArraySlice<UInt8> { decoded[0..<payloadCount] }
    /// The decoded signature bytes.
    public var signature: ArraySlice<UInt8> { decoded[payloadCount...] }

    /// The default cap on token size, in bytes.
    public static let defaultMaxBytes = 16 * 1024

    /// Splits and decodes a compact JWS, and parses its header.
    ///
    /// - Parameters:
    ///   - token: `header.payload.signature`, each part unpadded base64url.
    ///   - maxBytes: tokens longer than this are refused before any decoding.
    /// - Throws: ``JOSEError/Code/malformedToken`` saying which part is wrong and how.
    public init(_ token: String, maxBytes: Int = CompactJWS.defaultMaxBytes) throws {
        try self.init(token, maxBytes: maxBytes, knownHeader: nil)
    }

    /// Splits and decodes a compact JWS whose header segment the caller parsed before, from the
    /// same text: `knownHeader` is taken for it instead of decoding and parsing it again (a
    /// verifier's cache, keyed by the segment's text).
    package init(_ token: String, maxBytes: Int, knownHeader: JOSEHeader?) throws {
        var token = token
        (header, decoded, payloadCount, signingInputLength) = try token.withUTF8 { bytes in
            try Self.split(bytes, maxBytes: maxBytes, knownHeader: knownHeader)
        }
        self.token = token
    }

    private static func split(
        _ bytes: UnsafeBufferPointer<UInt8>, maxBytes: Int, knownHeader: JOSEHeader?
    ) throws -> (JOSEHeader, [UInt8], Int, Int) {
        guard bytes.count <= maxBytes else {
            throw JOSEError(.malformedToken, "token is \(bytes.count) bytes; the limit is \(maxBytes)")
        }
        guard !bytes.isEmpty else { throw JOSEError(.malformedToken, "token is empty") }
        guard let first = Self.indexOfDot(bytes, from: 0), let second = Self.indexOfDot(bytes, from: first + 1),
            Self.indexOfDot(bytes, from: second + 1) == nil
        else {
            let segments = bytes.count { $0 == UInt8(ascii: ".") } + 1
            let hint = segments == 5 ? " (five segments is a JWE, an encrypted token, which is not supported)" : ""
            throw JOSEError(
                .malformedToken,
                """
                token has \(segments) segment\(segments == 1 ? "" : "s"); a compact JWS has exactly 3 \
                (header.payload.signature)\(hint)
                """
            )
        }
        // The header is needed only to be parsed, so it is decoded into scratch space.
        let headerObject: JSONObject
        if let knownHeader {
            headerObject = knownHeader.json
        } else {
            let headerText = UnsafeBufferPointer(rebasing: bytes[0..<first])
            guard let headerCount = Base64URL.decodedCount(headerText.count) else {
                throw malformed("header", headerText)
            }
            headerObject = try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: headerCount) { scratch in
                do { try Base64URL.decode(headerText, into: scratch) } catch {
                    throw malformed("header", headerText)
                }
                return try parseObject(UnsafeBufferPointer(scratch), part: "header")
            }
        }
        guard second + 1 < bytes.count else {
            // An unsecured or HMAC token is refused for its algorithm (as Docs/cli.md and
            // Docs/server.md class it), whatever else is wrong with it.
            if let name = headerObject["alg"]?.stringValue { try JWSAlgorithm.refuseUnsecured(name) }
            throw JOSEError(.malformedToken, "signature segment is empty (an unsecured JWS is never accepted)")
        }
        // Payload and signature share one allocation.
        let payloadText = UnsafeBufferPointer(rebasing: bytes[(first + 1)..<second])
        let signatureText = UnsafeBufferPointer(rebasing: bytes[(second + 1)...])
        guard let payloadCount = Base64URL.decodedCount(payloadText.count) else {
            throw malformed("payload", payloadText)
        }
        guard let signatureCount = Base64URL.decodedCount(signatureText.count) else {
            throw malformed("signature", signatureText)
        }
        var failure: JOSEError?
        let decoded = [UInt8](unsafeUninitializedCapacity: payloadCount + signatureCount) { buffer, initialized in
            initialized = 0
            do {
                try Base64URL.decode(payloadText, into: UnsafeMutableBufferPointer(rebasing: buffer[0..<payloadCount]))
            } catch {
                failure = malformed("payload", payloadText)
                return
            }
            do {
                try Base64URL.decode(signatureText, into: UnsafeMutableBufferPointer(rebasing: buffer[payloadCount...]))
            } catch {
                failure = malformed("signature", signatureText)
                return
            }
            initialized = payloadCount + signatureCount
        }
        if let failure { throw failure }
        return (try knownHeader ?? JOSEHeader(headerObject), decoded, payloadCount, second)
    }

    /// The error for a segment that is not base64url, saying why.
    private static func malformed(_ part: String, _ text: UnsafeBufferPointer<UInt8>) -> JOSEError {
        do {
            _ = try Base64URL.decode(text)
            return JOSEError(.malformedToken, "\(part) segment is not valid base64url")
        } catch {
            return JOSEError(.malformedToken, "\(part) segment is not valid base64url: \(error)")
        }
    }

    private static func indexOfDot(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        guard start < bytes.count, let base = bytes.baseAddress,
            let found = memchr(base + start, Int32(UInt8(ascii: ".")), bytes.count - start)
        else { return nil }
        return base.distance(to: found.assumingMemoryBound(to: UInt8.self))
    }

    static func parseObject(_ bytes: UnsafeBufferPointer<UInt8>, part: String) throws -> JSONObject {
        let value: JSONValue
        do {
            value = try StrictJSON.parse(buffer: bytes, limits: .jose)
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
        try decoded.withUnsafeBufferPointer {
            try Self.parseObject(UnsafeBufferPointer(rebasing: $0[0..<payloadCount]), part: "payload")
        }
    }

    /// The text of `token`'s header segment (before its first `.`), when it is at most
    /// `maxBytes` long: the key of a verifier's cache of parsed headers (``init(_:maxBytes:knownHeader:)``).
    package static func headerSegment(of token: String, maxBytes: Int) -> String? {
        var token = token
        return token.withUTF8 { bytes in
            UnsafeBufferPointer(rebasing: bytes.prefix(maxBytes + 1)).firstIndex(of: UInt8(ascii: ".")).map {
                String(decoding: UnsafeBufferPointer(rebasing: bytes[..<$0]), as: UTF8.self)
            }
        }
    }

    /// Calls `body` with the bytes the signature covers: the ASCII `header.payload`.
    public func withSigningInput<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        var token = token
        return try token.withUTF8 { bytes in
            try body(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[0..<signingInputLength]))
        }
    }
}
