#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Crypto
import ShadowApple
public import ShadowCore
import ShadowJWKS
import HTTPTypes

/// Proof Key for Code Exchange (RFC 7636) with S256, and the authorization request's URL.
public struct PKCE: Sendable, CustomStringConvertible {
    /// 43 characters of base64url from 32 random bytes (RFC 7636, section 4.1).
    public let verifier: String
    /// BASE64URL(SHA-256(verifier)).
    public let challenge: String
    /// A random `state`, to match the redirect against.
    public let state: String

    public init() {
        verifier = Base64URL.encode(SecretBytes.random(count: 32).withUnsafeBytes { Array($0) })
        challenge = Self.challenge(for: verifier)
        state = Base64URL.encode(SecretBytes.random(count: 16).withUnsafeBytes { Array($0) })
    }

    /// The verifier is the proof the code is ours: it never prints.
    public var description: String { "PKCE(challenge \(challenge), verifier redacted)" }

    public static func challenge(for verifier: String) -> String {
        Base64URL.encode(Array(SHA256.hash(data: Array(verifier.utf8))))
    }

    /// The URL to send the user to (RFC 6749, section 4.1.1, with RFC 7636's two parameters).
    /// Google also gets `access_type=offline` and `prompt=consent`, without which it returns no
    /// refresh token.
    public func authorizationURL(
        endpoint: String, client: OAuthClient, redirectURI: String, scope: String?
    ) -> String {
        var fields = [
            ("response_type", "code"), ("client_id", client.clientID), ("redirect_uri", redirectURI),
            ("state", state), ("code_challenge", challenge), ("code_challenge_method", "S256"),
        ]
        if let scope { fields.append(("scope", scope)) }
        if client.preset == .google { fields += [("access_type", "offline"), ("prompt", "consent")] }
        if client.preset == .apple { fields.append(("response_mode", "form_post")) }
        // In a URL's query a space is %20 (the form encoding's + would do for most servers, not all).
        let query = String(decoding: FormEncoding.encode(fields), as: UTF8.self).split(
            separator: "+", omittingEmptySubsequences: false
        ).joined(separator: "%20")
        return endpoint + (endpoint.contains("?") ? "&" : "?") + query
    }

    /// The code from what the user pasted: the code itself, or the redirect URL (whose `state`
    /// must be this one's).
    public func code(fromPasted pasted: String) throws -> SecretBytes {
        let text = pasted.trimmingNewlines
        guard
            let query = text.split(byte: UInt8(ascii: "?"), maxSplits: 1).dropFirst().first
                ?? (text.contains("code=") ? Substring(text) : nil)
        else {
            guard !text.isEmpty, text.utf8.count <= 4096, !text.contains(" ") else {
                throw TokenError(.notConfigured, "no authorization code was given")
            }
            return SecretBytes(utf8: text)
        }
        var code: String?
        var returnedState: String?
        for (name, value) in FormDecoding.pairs(in: query) {
            if name.utf8.elementsEqual("code".utf8) { code = value }
            if name.utf8.elementsEqual("state".utf8) { returnedState = value }
            if name.utf8.elementsEqual("error".utf8) {
                throw TokenError(.rejected, "the authorization server answered \(value.quotedForMessage)")
            }
        }
        guard let code, !code.isEmpty else { throw TokenError(.notConfigured, "the redirect URL holds no code") }
        guard let returnedState, returnedState.utf8.elementsEqual(state.utf8) else {
            throw TokenError(.rejected, "the redirect URL's state is not this sign-in's: refusing the code")
        }
        return SecretBytes(utf8: code)
    }
}

extension String {
    /// Without trailing CR, LF and spaces, and leading spaces, by bytes (a String holds CR LF as
    /// one Character, which is neither "\r" nor "\n").
    fileprivate var trimmingNewlines: String {
        var text = Substring(self).utf8[...]
        while let last = text.last,
            last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") || last == UInt8(ascii: " ")
        {
            text = text.dropLast()
        }
        while text.first == UInt8(ascii: " ") { text = text.dropFirst() }
        return String(Substring(text))
    }
}
