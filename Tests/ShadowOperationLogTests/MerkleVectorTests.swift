import Foundation
import ShadowCore
import ShadowOperationLog
import ShadowTestSupport
import Testing

/// RFC 9162 proofs against the published vectors of transparency-dev/merkle
/// (TestVectors/transparency-dev-merkle): the verifier accepts exactly the happy paths, and the
/// prover, over the RFC 6962 test tree, produces the published proofs and roots.
@Suite struct MerkleVectorTests {
    struct Case: Decodable {
        let leafIdx: UInt64?
        let treeSize: UInt64?
        let root: String?
        let leafHash: String?
        let size1: UInt64?
        let size2: UInt64?
        let root1: String?
        let root2: String?
        let proof: [String]?
        let desc: String
        let wantErr: Bool
    }

    /// A tree hash read from 32 bytes is those bytes, whatever the collection; equality, in
    /// constant time, sees a change in any one bit of any byte.
    @Test func treeHashesReadAndCompareEveryByte() throws {
        let bytes = (0..<32).map { UInt8($0 * 7 + 3) }
        let hash = try #require(TreeHash(bytes: bytes))
        #expect(hash.bytes == bytes)
        #expect(TreeHash(bytes: bytes[...]) == hash)
        #expect(TreeHash(bytes: bytes.lazy.map { $0 }) == hash)  // not contiguous: read byte by byte
        #expect(TreeHash(bytes: bytes.dropLast()) == nil)
        #expect(TreeHash(bytes: bytes + [0]) == nil)
        #expect(hash.constantTimeEquals(try #require(TreeHash(bytes: bytes))))
        for index in 0..<32 {
            for bit in [0, 7] {
                var changed = bytes
                changed[index] ^= 1 << bit
                let other = try #require(TreeHash(bytes: changed))
                #expect(!hash.constantTimeEquals(other), "byte \(index), bit \(bit)")
                #expect(!other.constantTimeEquals(hash), "byte \(index), bit \(bit)")
            }
        }
    }

    static func cases(_ kind: String) throws -> [(String, Case)] {
        let folder = PackagePaths.vectors.appendingPathComponent("transparency-dev-merkle/\(kind)")
        let files = FileManager.default.enumerator(atPath: folder.path)!.compactMap { $0 as? String }
            .filter { $0.hasSuffix(".json") }.sorted()
        return try files.map { file in
            (file, try JSONDecoder().decode(Case.self, from: Data(contentsOf: folder.appendingPathComponent(file))))
        }
    }

    /// A hash from the vector, or a value that cannot be one (the vectors' garbage is not 32 bytes).
    static func hash(_ base64: String?) -> TreeHash? { base64.flatMap { TreeHash(base64: $0) } }

    /// The RFC 6962 test leaves.
    static let leaves: [[UInt8]] = [
        [], [0x00], [0x10], [0x20, 0x21], [0x30, 0x31], [0x40, 0x41, 0x42, 0x43],
        Array(0x50...0x57), Array(0x60...0x6f),
    ]

    static func tree(_ size: Int) -> MemoryTree {
        var tree = MemoryTree()
        for leaf in leaves.prefix(size) { tree.append(TreeHash.leaf(leaf)) }
        return tree
    }

    @Test func inclusionVectors() throws {
        let cases = try Self.cases("inclusion")
        #expect(cases.count >= 13)
        for (file, vector) in cases {
            let verdict = Result {
                guard let leaf = Self.hash(vector.leafHash), let root = Self.hash(vector.root) else {
                    throw LogError(.proofRejected, "not a hash")
                }
                let proof = try (vector.proof ?? []).map {
                    guard let hash = Self.hash($0) else { throw LogError(.proofRejected, "not a hash") }
                    return hash
                }
                try MerkleProof.verifyInclusion(
                    index: vector.leafIdx!, size: vector.treeSize!, leaf: leaf, proof: proof, root: root)
            }
            switch verdict {
            case .success: #expect(!vector.wantErr, "\(file): \(vector.desc) was accepted")
            case .failure(let error): #expect(vector.wantErr, "\(file): \(vector.desc) was refused: \(error)")
            }
            guard !vector.wantErr else { continue }
            // Our prover gives the same proof and root over the same tree.
            let tree = Self.tree(Int(vector.treeSize!))
            let proof = try MerkleTree.inclusionProof(of: tree, index: vector.leafIdx!, size: vector.treeSize!)
            #expect(proof.map(\.base64) == (vector.proof ?? []), "\(file)")
            #expect(tree.root.base64 == vector.root, "\(file)")
            #expect(tree.leaf(vector.leafIdx!)?.base64 == vector.leafHash, "\(file)")
        }
    }

    @Test func consistencyVectors() throws {
        let cases = try Self.cases("consistency")
        #expect(cases.count >= 13)
        for (file, vector) in cases {
            let verdict = Result {
                guard let old = Self.hash(vector.root1), let new = Self.hash(vector.root2) else {
                    throw LogError(.proofRejected, "not a hash")
                }
                let proof = try (vector.proof ?? []).map {
                    guard let hash = Self.hash($0) else { throw LogError(.proofRejected, "not a hash") }
                    return hash
                }
                try MerkleProof.verifyConsistency(
                    oldSize: vector.size1!, newSize: vector.size2!, oldRoot: old, newRoot: new, proof: proof)
            }
            switch verdict {
            case .success: #expect(!vector.wantErr, "\(file): \(vector.desc) was accepted")
            case .failure(let error): #expect(vector.wantErr, "\(file): \(vector.desc) was refused: \(error)")
            }
            guard !vector.wantErr else { continue }
            let tree = Self.tree(Int(vector.size2!))
            let proof = try MerkleTree.consistencyProof(of: tree, from: vector.size1!, to: vector.size2!)
            #expect(proof.map(\.base64) == (vector.proof ?? []), "\(file)")
            #expect(try MerkleTree.root(of: tree, size: vector.size1!).base64 == vector.root1, "\(file)")
        }
    }

    /// Every proof the prover makes, for every pair of sizes up to 70, verifies; and each fails
    /// once any one of its hashes has one bit flipped.
    @Test func everyProofUpTo70Verifies() throws {
        var tree = MemoryTree()
        var frontier = TreeFrontier()
        for value in 0..<70 {
            let leaf = TreeHash.leaf([UInt8(value), 0xAB])
            tree.append(leaf)
            frontier.append(leaf)
            #expect(frontier.root == tree.root)
        }
        for size in UInt64(1)...70 {
            let root = try MerkleTree.root(of: tree, size: size)
            for index in 0..<size {
                let proof = try MerkleTree.inclusionProof(of: tree, index: index, size: size)
                try MerkleProof.verifyInclusion(
                    index: index, size: size, leaf: tree.leaf(index)!, proof: proof, root: root)
                if let first = proof.first {
                    var bytes = first.bytes
                    bytes[0] ^= 1
                    let flipped = [TreeHash(bytes: bytes)!] + proof.dropFirst()
                    #expect(throws: LogError.self) {
                        try MerkleProof.verifyInclusion(
                            index: index, size: size, leaf: tree.leaf(index)!, proof: flipped, root: root)
                    }
                }
            }
            for old in 0...size {
                let proof = try MerkleTree.consistencyProof(of: tree, from: old, to: size)
                let oldRoot = try MerkleTree.root(of: tree, size: old)
                try MerkleProof.verifyConsistency(
                    oldSize: old, newSize: size, oldRoot: oldRoot, newRoot: root, proof: proof)
                if old > 0, old < size {
                    #expect(throws: LogError.self) {
                        try MerkleProof.verifyConsistency(
                            oldSize: old, newSize: size, oldRoot: root, newRoot: oldRoot, proof: proof)
                    }
                }
            }
        }
    }

    /// A tree cut back to a prefix is the tree of that prefix, node for node, and grows again
    /// into the tree of every leaf.
    @Test func aTruncatedTreeIsTheTreeOfItsPrefix() throws {
        let count = Self.leaves.count
        for size in 0...count {
            let whole = Self.tree(count)
            var cut = whole
            cut.truncate(to: UInt64(size))
            let prefix = Self.tree(size)
            #expect(cut.size == UInt64(size))
            #expect(cut.root == prefix.root)
            for level in 0..<5 {
                for index in 0..<UInt64(count) {
                    #expect(
                        (try? cut.node(level: level, index: index)) == (try? prefix.node(level: level, index: index)))
                }
            }
            for leaf in Self.leaves[size...] { cut.append(TreeHash.leaf(leaf)) }
            #expect(cut.root == whole.root)
            #expect((try? cut.node(level: 3, index: 0)) == (try? whole.node(level: 3, index: 0)))
        }
        var tree = Self.tree(count)
        tree.truncate(to: UInt64(count + 5))
        #expect(tree.size == UInt64(count))
    }

    @Test func emptyTreeRootIsSHA256OfNothing() {
        #expect(TreeHash.empty.hex == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(MemoryTree().root == .empty)
    }
}
