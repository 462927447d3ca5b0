import Foundation
import ShadowCore
import ShadowDPoP
import ShadowJOSE

enum DPoPTargets {
    static let url = "https://server.example.com/auth/refresh"
    /// The clock of the seed proofs (TestVectors/shadow/dpop/vectors.json).
    static let clock = WallClock.fixed(Date(timeIntervalSince1970: 1_700_000_000))

    /// Mode byte 0: the rest is a proof, checked twice for a POST to the seeds' URL by a fresh
    /// verifier (the second check takes the header from the verifier's cache, and must reach the
    /// same answer); what it accepts holds together (its key can verify its algorithm, its htu
    /// normalizes to the URL). The verifier and its cache go with the input, so anything left
    /// allocated afterwards is a leak. Mode 1: a URI, whose normal form is its own normal form.
    static let proof: FuzzTargets.Harness = { data in
        guard let mode = data.first else { return }
        let text = String(decoding: data.dropFirst(), as: UTF8.self)
        if mode & 1 == 0 {
            let verifier = DPoPVerifier(clock: clock)
            let first = Result { try verifier.verify([text], method: "POST", url: url) }
            let second = Result { try verifier.verify([text], method: "POST", url: url) }
            switch (first, second) {
            case (.failure(let a as DPoPError), .failure(let b as DPoPError)):
                precondition(a.code == b.code, "a cached header changed the refusal: \(a.code) then \(b.code)")
                return
            case (.success(let a), .success(let b)):
                precondition(
                    a.thumbprint == b.thumbprint && a.replayKey == b.replayKey, "a cached header changed the proof")
            default:
                preconditionFailure("a cached header changed whether the proof is accepted")
            }
            guard case .success(let proof) = first else { return }
            precondition(proof.key.canVerify(proof.algorithm), "an accepted proof's key cannot verify its alg")
            precondition(proof.targetURI == url, "an accepted proof's htu is another URI")
            precondition(proof.thumbprint == proof.key.thumbprint)
            precondition(proof.replayKey.count == 16)
        } else if let normal = HTTPTargetURI.normalized(text) {
            precondition(HTTPTargetURI.normalized(normal) == normal, "normalizing a normal form changed it")
        }
    }
}
