import Foundation
import ShadowCore
import ShadowDPoP
import ShadowJOSE

enum DPoPTargets {
    static let url = "https://server.example.com/auth/refresh"
    /// The clock of the seed proofs (TestVectors/shadow/dpop/vectors.json).
    static let verifier = DPoPVerifier(clock: .fixed(Date(timeIntervalSince1970: 1_700_000_000)))

    /// Mode byte 0: the rest is a proof, checked for a POST to the seeds' URL; what it accepts
    /// holds together (its key can verify its algorithm, its htu normalizes to the URL). Mode 1: a
    /// URI, whose normal form is its own normal form.
    static let proof: FuzzTargets.Harness = { data in
        guard let mode = data.first else { return }
        let text = String(decoding: data.dropFirst(), as: UTF8.self)
        if mode & 1 == 0 {
            guard let proof = try? verifier.verify([text], method: "POST", url: url) else { return }
            precondition(proof.key.canVerify(proof.algorithm), "an accepted proof's key cannot verify its alg")
            precondition(proof.targetURI == url, "an accepted proof's htu is another URI")
            precondition(proof.thumbprint == proof.key.thumbprint)
            precondition(proof.replayKey.count == 16)
        } else if let normal = HTTPTargetURI.normalized(text) {
            precondition(HTTPTargetURI.normalized(normal) == normal, "normalizing a normal form changed it")
        }
    }
}
