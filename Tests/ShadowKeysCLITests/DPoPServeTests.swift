import Crypto
import Foundation
import ShadowCore
import ShadowDPoP
import ShadowTestSupport
import Testing

/// DPoP through `serve` end to end (Docs/dpop.md, "Sessions"), with nonces: the sign-in learns the
/// nonce and binds, the protected route refuses the bound token as a bearer token and takes it
/// with a proof, a stolen refresh token fails without the key.
@Suite(.tags(.multiProcess), .ownThreads) struct DPoPServeTests {
    static func header(_ name: String, in block: String) -> String? {
        for line in block.split(separator: "\r\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == name.lowercased() {
                return parts[1].trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }

    @Test func aBoundSessionThroughServe() throws {
        let server = try SessionServer(extra: ["--dpop-nonce"])
        let device = try DPoPSigner.es256(P256.Signing.PrivateKey())
        func proof(_ method: String, _ path: String, token: String? = nil, nonce: String?) throws -> String {
            "DPoP: "
                + (try device.proof(
                    method: method, url: SessionServer.issuer + path, accessToken: token, nonce: nonce))
        }
        let subject = "001234.serve.0001"
        func signIn(nonce: String?) throws -> SessionServer.Answer {
            try server.request(
                "POST", "/auth/apple",
                json: [
                    "identityToken": .string(try server.identityToken(subject: subject)),
                    "authorizationCode": .string(server.apple.issueCode(for: subject)),
                ], headers: [try proof("POST", "/auth/apple", nonce: nonce)])
        }
        let first = try signIn(nonce: nil)
        #expect(first.status == 400 && first.json["error"]?.objectValue?["code"] == "use_dpop_nonce", "\(first.body)")
        let nonce = try #require(Self.header("DPoP-Nonce", in: first.headers))
        let signedIn = try signIn(nonce: nonce)
        #expect(signedIn.status == 200, "\(signedIn.body)")
        #expect(signedIn.json["tokenType"] == "DPoP")
        let access = try #require(signedIn.json["accessToken"]?.stringValue)
        let refresh = try #require(signedIn.json["refreshToken"]?.stringValue)

        let asBearer = try server.request("GET", "/auth/sessions", headers: ["Authorization: Bearer " + access])
        #expect(asBearer.status == 401)
        #expect(asBearer.headers.contains("DPoP algs=\"ES256 RS256\""), "\(asBearer.headers)")
        let withProof = try server.request(
            "GET", "/auth/sessions",
            headers: ["Authorization: DPoP " + access, try proof("GET", "/auth/sessions", token: access, nonce: nonce)])
        #expect(withProof.status == 200, "\(withProof.body)")
        // HEAD, answered as GET is, takes a proof of its own method (htm, RFC 9449, 4.3).
        let headWithGetProof = try server.request(
            "HEAD", "/auth/sessions",
            headers: ["Authorization: DPoP " + access, try proof("GET", "/auth/sessions", token: access, nonce: nonce)])
        #expect(headWithGetProof.status == 401, "\(headWithGetProof.headers)")
        let head = try server.request(
            "HEAD", "/auth/sessions",
            headers: [
                "Authorization: DPoP " + access, try proof("HEAD", "/auth/sessions", token: access, nonce: nonce),
            ])
        #expect(head.status == 200 && head.body.isEmpty, "\(head.headers)")

        let stolen = try server.refresh(refresh)
        #expect(stolen.status == 400 && stolen.json["error"]?.objectValue?["code"] == "invalid_dpop_proof")
        let genuine = try server.request(
            "POST", "/auth/refresh", json: ["refreshToken": .string(refresh)],
            headers: [try proof("POST", "/auth/refresh", nonce: nonce)])
        #expect(genuine.status == 200, "\(genuine.body)")
        #expect(genuine.json["tokenType"] == "DPoP")

        // Logout through serve's route: the stolen token alone cannot end the session; the key can.
        let next = try #require(genuine.json["refreshToken"]?.stringValue)
        let stolenLogout = try server.request("POST", "/auth/logout", json: ["refreshToken": .string(next)])
        #expect(stolenLogout.status == 400 && stolenLogout.json["error"]?.objectValue?["code"] == "invalid_dpop_proof")
        let logout = try server.request(
            "POST", "/auth/logout", json: ["refreshToken": .string(next)],
            headers: [try proof("POST", "/auth/logout", nonce: nonce)])
        #expect(logout.status == 200 && logout.json["revoked"] == true, "\(logout.body)")
    }
}

/// DPoP-bound sessions beside Apple's notifications, through `serve`: an email notification ends
/// no bound session, consent-revoked ends it whatever key signs, and a later sign-in binds the
/// new session to the key it presents, not the old one.
@Suite(.tags(.multiProcess), .ownThreads) struct DPoPNotificationSeamTests {
    @Test func notificationsEndBoundSessionsAsTheyEndBearerOnes() throws {
        let server = try SessionServer()
        let subject = "001234.bound.0007"
        func proof(_ signer: DPoPSigner, _ method: String, _ path: String, token: String? = nil) throws -> String {
            "DPoP: " + (try signer.proof(method: method, url: SessionServer.issuer + path, accessToken: token))
        }
        func signIn(_ signer: DPoPSigner, issuedAt: Int64? = nil) throws -> SessionServer.Answer {
            try server.request(
                "POST", "/auth/apple",
                json: [
                    "identityToken": .string(try server.identityToken(subject: subject, issuedAt: issuedAt)),
                    "authorizationCode": .string(server.apple.issueCode(for: subject)),
                ], headers: [try proof(signer, "POST", "/auth/apple")])
        }
        func refresh(_ token: String, _ signer: DPoPSigner) throws -> SessionServer.Answer {
            try server.request(
                "POST", "/auth/refresh", json: ["refreshToken": .string(token)],
                headers: [try proof(signer, "POST", "/auth/refresh")])
        }
        let device = try DPoPSigner.es256(P256.Signing.PrivateKey())
        let signedIn = try signIn(device)
        #expect(signedIn.status == 200 && signedIn.json["tokenType"] == "DPoP", "\(signedIn.body)")
        var refreshToken = try #require(signedIn.json["refreshToken"]?.stringValue)

        let emailed = try server.notify("email-disabled", subject: subject, ago: 2)
        #expect(emailed.status == 200 && emailed.body.contains("applied"), "\(emailed.body)")
        let afterEmail = try refresh(refreshToken, device)
        #expect(afterEmail.status == 200 && afterEmail.json["tokenType"] == "DPoP", "\(afterEmail.body)")
        refreshToken = try #require(afterEmail.json["refreshToken"]?.stringValue)
        let access = try #require(afterEmail.json["accessToken"]?.stringValue)

        let revoked = try server.notify("consent-revoked", subject: subject)
        #expect(revoked.status == 200 && revoked.body.contains("applied"), "\(revoked.body)")
        // The key's proof is good; the session is over, and says so.
        let afterRevocation = try refresh(refreshToken, device)
        #expect(afterRevocation.status == 401 && afterRevocation.body.contains("revoked"), "\(afterRevocation.body)")
        let devices = try server.request(
            "GET", "/auth/sessions",
            headers: ["Authorization: DPoP " + access, try proof(device, "GET", "/auth/sessions", token: access)])
        #expect(devices.status == 401, "the ended session's access token: \(devices.body)")

        // A new sign-in with a new key: bound to that key; the old one's proofs do not refresh it.
        let newDevice = try DPoPSigner.es256(P256.Signing.PrivateKey())
        let again = try signIn(newDevice, issuedAt: Int64(Date().timeIntervalSince1970) + 2)
        #expect(again.status == 200 && again.json["tokenType"] == "DPoP", "\(again.body)")
        let newToken = try #require(again.json["refreshToken"]?.stringValue)
        let oldKey = try refresh(newToken, device)
        #expect(
            oldKey.status == 400 && oldKey.json["error"]?.objectValue?["code"] == "invalid_dpop_proof", "\(oldKey.body)"
        )
        // The refusal rotated nothing: the same token still refreshes with the right key.
        let newKey = try refresh(newToken, newDevice)
        #expect(newKey.status == 200, "\(newKey.body)")
    }
}
