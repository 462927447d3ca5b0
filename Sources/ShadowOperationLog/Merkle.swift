import Crypto
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import ShadowCore

/// A SHA-256 value in the log's Merkle tree (RFC 9162, section 2.1.1): a leaf hash, an interior
/// node, a root. Thirty-two bytes held inline, so trees of millions of nodes allocate nothing per node.
public struct TreeHash: Hashable, Sendable, CustomStringConvertible {
    var value: SIMD32<UInt8>

    init(_ value: SIMD32<UInt8>) { self.value = value }

    init(_ digest: SHA256Digest) {
        value = digest.withUnsafeBytes { $0.loadUnaligned(as: SIMD32<UInt8>.self) }
    }

    /// Exactly 32 bytes, else nil.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 32 else { return nil }
        // Contiguous bytes (every caller's) load as one vector; SIMD's subscript is a lane at a time.
        if let loaded = bytes.withContiguousStorageIfAvailable({
            UnsafeRawBufferPointer($0).loadUnaligned(as: SIMD32<UInt8>.self)
        }) {
            value = loaded
            return
        }
        var value = SIMD32<UInt8>()
        for (index, byte) in bytes.enumerated() { value[index] = byte }
        self.value = value
    }

    /// Standard base64 (RFC 4648, section 4) of exactly 32 bytes, in canonical form; else nil.
    public init?(base64: some StringProtocol) {
        guard let bytes = Base64.decode(base64), let hash = TreeHash(bytes: bytes) else { return nil }
        self = hash
    }

    public var bytes: [UInt8] { withUnsafeBytes(of: value) { Array($0) } }
    public var base64: String { Base64.encode(bytes) }
    public var hex: String { Hex.encode(bytes) }
    public var description: String { hex }

    /// Equality that takes the same time whichever byte differs.
    public func constantTimeEquals(_ other: TreeHash) -> Bool {
        // Every byte of the difference is folded in, as four 64-bit words: no early exit.
        let words = unsafeBitCast(value ^ other.value, to: SIMD4<UInt64>.self)
        return words[0] | words[1] | words[2] | words[3] == 0
    }

    /// The root of the empty tree: SHA-256 of no bytes.
    public static let empty = TreeHash(SHA256.hash(data: [UInt8]()))

    /// A leaf's hash: SHA-256(0x00 ‖ leaf bytes).
    public static func leaf(_ data: some DataProtocol) -> TreeHash {
        var hasher = SHA256()
        withUnsafeBytes(of: UInt8(0)) { hasher.update(bufferPointer: $0) }
        hasher.update(data: data)
        return TreeHash(hasher.finalize())
    }

    /// A leaf's hash from contiguous bytes, without copying them.
    public static func leaf(_ bytes: [UInt8]) -> TreeHash {
        var hasher = SHA256()
        withUnsafeBytes(of: UInt8(0)) { hasher.update(bufferPointer: $0) }
        bytes.withUnsafeBytes { hasher.update(bufferPointer: $0) }
        return TreeHash(hasher.finalize())
    }

    /// An interior node's hash: SHA-256(0x01 ‖ left ‖ right).
    public static func node(_ left: TreeHash, _ right: TreeHash) -> TreeHash {
        withUnsafeTemporaryAllocation(byteCount: 65, alignment: 1) { block in
            block[0] = 0x01
            withUnsafeBytes(of: left.value) {
                UnsafeMutableRawBufferPointer(rebasing: block[1..<33]).copyMemory(from: $0)
            }
            withUnsafeBytes(of: right.value) {
                UnsafeMutableRawBufferPointer(rebasing: block[33..<65]).copyMemory(from: $0)
            }
            return TreeHash(SHA256.hash(data: UnsafeRawBufferPointer(block)))
        }
    }
}

/// Standard base64 with padding, decoded strictly: only the canonical encoding of the bytes it
/// stands for is accepted (no whitespace, no line breaks, no stray bits in the last character).
package enum Base64 {
    package static func encode(_ bytes: some Sequence<UInt8>) -> String { Data(bytes).base64EncodedString() }

    package static func decode(_ text: some StringProtocol) -> [UInt8]? {
        guard text.utf8.count % 4 == 0, let data = Data(base64Encoded: String(text)) else { return nil }
        let bytes = [UInt8](data)
        guard encode(bytes) == text else { return nil }
        return bytes
    }
}

/// Where complete subtree hashes come from: the hash of the aligned subtree of 2^level leaves
/// that starts at leaf `index << level`. Level 0 holds the leaf hashes.
public protocol TreeNodes {
    /// The tree's size in leaves.
    var size: UInt64 { get }
    /// The hash of a complete subtree of this tree.
    func node(level: Int, index: UInt64) throws -> TreeHash
}

/// RFC 9162's tree head and proofs (sections 2.1.1, 2.1.3, 2.1.4), over any ``TreeNodes``.
///
/// Every subtree the algorithms need is split into aligned complete subtrees, so a proof reads
/// O(log² n) stored nodes and hashes nothing else.
public enum MerkleTree {
    /// MTH(D[start:end]) of `nodes`, for 0 ≤ start < end ≤ nodes.size (or the empty root for an empty range).
    public static func hash(of nodes: some TreeNodes, from start: UInt64, to end: UInt64) throws -> TreeHash {
        guard start <= end, end <= nodes.size else {
            throw LogError(.invalidParameter, "the range \(start)..<\(end) is outside a tree of \(nodes.size)")
        }
        if start == end { return .empty }
        return try subtree(nodes, start, end)
    }

    /// The root of the tree's first `size` leaves.
    public static func root(of nodes: some TreeNodes, size: UInt64) throws -> TreeHash {
        try hash(of: nodes, from: 0, to: size)
    }

    private static func subtree(_ nodes: some TreeNodes, _ start: UInt64, _ end: UInt64) throws -> TreeHash {
        let count = end - start
        if count & (count - 1) == 0, start % count == 0 {
            return try nodes.node(level: count.trailingZeroBitCount, index: start >> count.trailingZeroBitCount)
        }
        let split = largestPowerOfTwo(below: count)
        return TreeHash.node(try subtree(nodes, start, start + split), try subtree(nodes, start + split, end))
    }

    /// The largest power of two strictly below `count` (count ≥ 2).
    static func largestPowerOfTwo(below count: UInt64) -> UInt64 {
        UInt64(1) << (63 - (count - 1).leadingZeroBitCount)
    }

    /// The inclusion proof of leaf `index` in the tree of the first `size` leaves: PATH(m, D[n]),
    /// from the leaf's sibling up to the root's child.
    public static func inclusionProof(of nodes: some TreeNodes, index: UInt64, size: UInt64) throws -> [TreeHash] {
        guard size <= nodes.size else {
            throw LogError(.invalidParameter, "a tree of \(nodes.size) entries has no size \(size)")
        }
        guard index < size else {
            throw LogError(.invalidParameter, "entry \(index) is not in a tree of \(size) entries")
        }
        var proof: [TreeHash] = []
        try path(nodes, index, 0, size, into: &proof)
        return proof
    }

    private static func path(
        _ nodes: some TreeNodes, _ index: UInt64, _ start: UInt64, _ end: UInt64, into proof: inout [TreeHash]
    ) throws {
        let count = end - start
        guard count > 1 else { return }
        let split = largestPowerOfTwo(below: count)
        if index < split {
            try path(nodes, index, start, start + split, into: &proof)
            proof.append(try subtree(nodes, start + split, end))
        } else {
            try path(nodes, index - split, start + split, end, into: &proof)
            proof.append(try subtree(nodes, start, start + split))
        }
    }

    /// The consistency proof from the tree of `oldSize` leaves to that of `newSize`: PROOF(m, D[n]).
    /// Empty when the sizes are equal or the old tree is empty.
    public static func consistencyProof(
        of nodes: some TreeNodes, from oldSize: UInt64, to newSize: UInt64
    ) throws
        -> [TreeHash]
    {
        guard newSize <= nodes.size else {
            throw LogError(.invalidParameter, "a tree of \(nodes.size) entries has no size \(newSize)")
        }
        guard oldSize <= newSize else {
            throw LogError(.invalidParameter, "the old size \(oldSize) is larger than the new size \(newSize)")
        }
        guard oldSize > 0, oldSize < newSize else { return [] }
        var proof: [TreeHash] = []
        try subproof(nodes, oldSize, 0, newSize, complete: true, into: &proof)
        return proof
    }

    private static func subproof(
        _ nodes: some TreeNodes, _ old: UInt64, _ start: UInt64, _ end: UInt64, complete: Bool,
        into proof: inout [TreeHash]
    ) throws {
        let count = end - start
        if old == count {
            if !complete { proof.append(try subtree(nodes, start, end)) }
            return
        }
        let split = largestPowerOfTwo(below: count)
        if old <= split {
            try subproof(nodes, old, start, start + split, complete: complete, into: &proof)
            proof.append(try subtree(nodes, start + split, end))
        } else {
            try subproof(nodes, old - split, start + split, end, complete: false, into: &proof)
            proof.append(try subtree(nodes, start, start + split))
        }
    }
}

/// Checking proofs against roots, with nothing but the hashes (RFC 9162, sections 2.1.3.2 and 2.1.4.2).
public enum MerkleProof {
    /// Checks that `leaf` is entry `index` of the tree of `size` leaves whose root is `root`.
    /// - Throws: ``LogErrorCode/proofRejected`` naming the first rule that failed.
    public static func verifyInclusion(
        index: UInt64, size: UInt64, leaf: TreeHash, proof: [TreeHash], root: TreeHash
    ) throws {
        guard index < size else { throw rejected("entry \(index) is not in a tree of \(size) entries") }
        var fn = index
        var sn = size - 1
        var hash = leaf
        for sibling in proof {
            guard sn > 0 else { throw rejected("the proof is longer than the path from the leaf to the root") }
            if fn & 1 == 1 || fn == sn {
                hash = .node(sibling, hash)
                if fn & 1 == 0 {
                    while fn & 1 == 0, fn != 0 {
                        fn >>= 1
                        sn >>= 1
                    }
                }
            } else {
                hash = .node(hash, sibling)
            }
            fn >>= 1
            sn >>= 1
        }
        guard sn == 0 else { throw rejected("the proof is shorter than the path from the leaf to the root") }
        guard hash.constantTimeEquals(root) else { throw rejected("the proof leads to another root") }
    }

    /// Checks that the tree of `oldSize` leaves with root `oldRoot` is a prefix of the tree of
    /// `newSize` leaves with root `newRoot`.
    /// - Throws: ``LogErrorCode/proofRejected`` naming the first rule that failed.
    public static func verifyConsistency(
        oldSize: UInt64, newSize: UInt64, oldRoot: TreeHash, newRoot: TreeHash, proof: [TreeHash]
    ) throws {
        guard oldSize <= newSize else { throw rejected("the old size \(oldSize) is larger than the new \(newSize)") }
        if oldSize == newSize {
            guard proof.isEmpty else { throw rejected("a proof between equal sizes must be empty") }
            guard oldRoot.constantTimeEquals(newRoot) else { throw rejected("the two roots of one size differ") }
            return
        }
        if oldSize == 0 {
            guard proof.isEmpty else { throw rejected("a proof from the empty tree must be empty") }
            return
        }
        guard !proof.isEmpty else { throw rejected("the proof is empty") }
        // An old tree of a power-of-two size is itself a node of the new one: the proof leaves it out.
        let path = oldSize & (oldSize - 1) == 0 ? [oldRoot] + proof : proof
        var fn = oldSize - 1
        var sn = newSize - 1
        while fn & 1 == 1 {
            fn >>= 1
            sn >>= 1
        }
        var first = path[path.startIndex]
        var second = first
        for node in path.dropFirst() {
            guard sn > 0 else { throw rejected("the proof is longer than it can be") }
            if fn & 1 == 1 || fn == sn {
                first = .node(node, first)
                second = .node(node, second)
                if fn & 1 == 0 {
                    while fn & 1 == 0, fn != 0 {
                        fn >>= 1
                        sn >>= 1
                    }
                }
            } else {
                second = .node(second, node)
            }
            fn >>= 1
            sn >>= 1
        }
        guard sn == 0 else { throw rejected("the proof is shorter than it must be") }
        guard first.constantTimeEquals(oldRoot) else { throw rejected("the proof does not lead to the old root") }
        guard second.constantTimeEquals(newRoot) else { throw rejected("the proof does not lead to the new root") }
    }

    static func rejected(_ reason: String) -> LogError { LogError(.proofRejected, reason) }
}

/// Every complete subtree hash of a tree, in memory: level L holds the hashes of the aligned
/// subtrees of 2^L leaves (about two hashes per leaf in all). Appending a leaf adds it to level 0
/// and completes the subtrees it closes.
public struct MemoryTree: TreeNodes, Sendable {
    private var levels: [[TreeHash]] = [[]]

    public init() {}

    public var size: UInt64 { UInt64(levels[0].count) }

    public func node(level: Int, index: UInt64) throws -> TreeHash {
        guard level < levels.count, index < UInt64(levels[level].count) else {
            throw LogError(.invalidParameter, "no complete subtree at level \(level), index \(index)")
        }
        return levels[level][Int(index)]
    }

    /// Adds a leaf hash; returns the root of the grown tree's last complete subtree.
    public mutating func append(_ leaf: TreeHash) {
        levels[0].append(leaf)
        var level = 0
        var index = levels[0].count - 1
        while index & 1 == 1 {
            let parent = TreeHash.node(levels[level][index - 1], levels[level][index])
            level += 1
            if level == levels.count { levels.append([]) }
            levels[level].append(parent)
            index >>= 1
        }
    }

    /// The root of the whole tree.
    public var root: TreeHash { (try? MerkleTree.root(of: self, size: size)) ?? .empty }

    /// Drops the leaves from `size` on and every node over any of them: the tree of the first
    /// `size` leaves, as appending them alone would have built it. A larger `size` changes nothing.
    public mutating func truncate(to size: UInt64) {
        guard size < self.size else { return }
        for level in levels.indices {
            levels[level].removeLast(levels[level].count - Int(size >> UInt64(level)))
        }
        while levels.count > 1, levels[levels.count - 1].isEmpty { levels.removeLast() }
    }

    /// The leaf hash of entry `index`.
    public func leaf(_ index: UInt64) -> TreeHash? {
        index < size ? levels[0][Int(index)] : nil
    }
}

/// The aligned complete subtree at `level` whose first leaf is `index << level`.
public struct NodeID: Hashable, Sendable, Comparable {
    public let level: Int
    public let index: UInt64

    public init(level: Int, index: UInt64) {
        self.level = level
        self.index = index
    }

    public static func < (lhs: NodeID, rhs: NodeID) -> Bool { (lhs.level, lhs.index) < (rhs.level, rhs.index) }
}

/// The right edge of a tree: the roots of the complete subtrees its size decomposes into (one per
/// set bit). Enough to append leaves and to compute the root, in O(log n) space.
public struct TreeFrontier: Sendable {
    public private(set) var size: UInt64
    /// By level; present exactly for the set bits of `size`.
    private var edge: [TreeHash?]

    public init() {
        size = 0
        edge = Array(repeating: nil, count: 64)
    }

    /// The node IDs a tree of `size` leaves keeps on its right edge.
    public static func ids(size: UInt64) -> [NodeID] {
        (0..<64).compactMap { level in
            size >> level & 1 == 1 ? NodeID(level: level, index: (size >> level) - 1) : nil
        }
    }

    /// The frontier of a tree of `size` leaves, given the hashes of ``ids(size:)``.
    public init(size: UInt64, nodes: [NodeID: TreeHash]) throws {
        self.init()
        self.size = size
        for id in Self.ids(size: size) {
            guard let hash = nodes[id] else {
                throw LogError(.tampered, "the tree's node at level \(id.level), index \(id.index) is missing")
            }
            edge[id.level] = hash
        }
    }

    /// Appends a leaf; returns the complete subtrees it closes (the leaf itself first).
    @discardableResult
    public mutating func append(_ leaf: TreeHash) -> [(NodeID, TreeHash)] {
        var closed = [(NodeID(level: 0, index: size), leaf)]
        closed.reserveCapacity(1 + size.trailingZeroBitCount + 1)
        appendEach(leaf) { closed.append(($0, $1)) }
        return closed
    }

    /// Appends a leaf, handing each complete subtree it closes above the leaf to `closed`.
    public mutating func appendEach(_ leaf: TreeHash, _ closed: (NodeID, TreeHash) -> Void) {
        var carry = leaf
        var level = 0
        // A set bit of the size is a complete subtree on the edge (the frontier's invariant).
        while size >> level & 1 == 1, let left = edge[level] {
            carry = .node(left, carry)
            edge[level] = nil
            level += 1
            closed(NodeID(level: level, index: size >> level), carry)
        }
        edge[level] = carry
        size += 1
    }

    /// The root of the tree.
    public var root: TreeHash {
        var result: TreeHash?
        for level in 0..<64 {
            guard let hash = edge[level] else { continue }
            result = result.map { .node(hash, $0) } ?? hash
        }
        return result ?? .empty
    }
}

/// Nodes held in a dictionary: what a backend fetched for one proof.
struct NodeMap: TreeNodes {
    let size: UInt64
    let nodes: [NodeID: TreeHash]

    func node(level: Int, index: UInt64) throws -> TreeHash {
        guard let hash = nodes[NodeID(level: level, index: index)] else {
            throw LogError(.tampered, "the tree's node at level \(level), index \(index) is missing")
        }
        return hash
    }
}

/// Records which nodes an algorithm reads (answering with a placeholder): the shape of a proof
/// depends only on the sizes and indices, so a backend can fetch exactly those nodes in one go.
final class NodeRecorder: TreeNodes {
    let size: UInt64
    private(set) var wanted: Set<NodeID> = []

    init(size: UInt64) { self.size = size }

    func node(level: Int, index: UInt64) throws -> TreeHash {
        wanted.insert(NodeID(level: level, index: index))
        return .empty
    }
}
