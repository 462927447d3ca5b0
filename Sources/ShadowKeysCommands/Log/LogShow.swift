import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowOperationLog

extension LogCommand {
    struct Show: AsyncParsableCommand, LogSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "show",
            abstract: "Print entries as JSON lines, opened (a pruned entry prints its index and \"pruned\": true).")

        @OptionGroup var log: LogOptions
        @Option(help: "The first entry to print.") var from: UInt64 = 0
        @Option(help: "How many entries to print (1 to 10000).") var count: Int = 100
        @Option(name: .customLong("entity-id"), help: "Only the entries about this entity (found by its keyed hash).")
        var entityID: String?

        func validate() throws {
            guard (1...OperationLog.maxReadCount).contains(count) else {
                throw ValidationError("--count: 1 to \(OperationLog.maxReadCount)")
            }
            guard from < 1 << 48 else { throw ValidationError("--from: at most 2^48") }
        }

        func run() async throws {
            try await reportingFailures(json: log.json, valid: true) {
                try await log.withLog { log in
                    if let entityID {
                        for index in try await log.indices(ofEntity: entityID, from: from, limit: count) {
                            Console.json(Self.json(index, try await log.entry(at: index)))
                        }
                        return
                    }
                    for (index, entry) in try await log.entries(from: from, count: count) {
                        Console.json(Self.json(index, entry))
                    }
                }
            }
        }

        static func json(_ index: UInt64, _ entry: OperationEntry?) -> JSONValue {
            guard let entry else { return ["index": .int(index), "pruned": true] }
            var object: JSONObject = [
                "index": .int(index), "operation": .string(entry.operation), "provider": .string(entry.provider),
                "entityType": .string(entry.entityType), "entityId": .string(entry.entityID),
                "time": .string(Timestamp(milliseconds: entry.time)?.rfc3339Exact ?? String(entry.time)),
                "success": .bool(entry.success),
            ]
            if let error = entry.error { object.set("error", .string(error)) }
            if let details = entry.details { object.set("details", .object(details)) }
            return .object(object)
        }
    }

    struct Checkpoint: AsyncParsableCommand, LogSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "checkpoint",
            abstract: "Print the latest signed checkpoint (a C2SP signed note), or the log's verifier key.")

        @OptionGroup var log: LogOptions
        @Flag(name: .customLong("verifier-key"), help: "Print the key that checks the checkpoints instead.")
        var verifierKey = false

        func run() async throws {
            try await reportingFailures(json: log.json, valid: true) {
                try await log.withLog { opened in
                    let signed = try await opened.checkpoint()
                    if log.json {
                        Console.json([
                            "checkpoint": .checkpoint(signed.checkpoint), "note": .string(signed.note),
                            "verifierKey": .string(opened.verifier.encoded),
                        ])
                    } else if verifierKey {
                        Console.out(opened.verifier.encoded)
                    } else {
                        Console.outRaw(signed.note)
                    }
                }
            }
        }
    }

    struct Prove: AsyncParsableCommand, LogSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "prove",
            abstract: "Print an inclusion proof (--inclusion N) or a consistency proof (--consistency OLD) as JSON.")

        @OptionGroup var log: LogOptions
        @Option(help: "The entry to prove included.") var inclusion: UInt64?
        @Option(help: "The older tree size to prove the log extends.") var consistency: UInt64?
        @Option(help: "The tree size to prove against (default: the latest checkpoint's).") var size: UInt64?

        func validate() throws {
            guard (inclusion == nil) != (consistency == nil) else {
                throw ValidationError("give one of --inclusion N or --consistency OLD")
            }
        }

        func run() async throws {
            try await reportingFailures(json: log.json, valid: true) {
                let output: JSONValue = try await log.withLog { log in
                    if let inclusion {
                        let proof = try await log.inclusionProof(index: inclusion, size: size)
                        return [
                            "index": .int(proof.index), "size": .int(proof.size),
                            "leafHash": .string(proof.leaf.base64),
                            "root": .string(proof.root.base64), "proof": .hashes(proof.path),
                        ]
                    }
                    let proof = try await log.consistencyProof(from: consistency ?? 0, to: size)
                    return [
                        "size1": .int(proof.oldSize), "size2": .int(proof.newSize),
                        "root1": .string(proof.oldRoot.base64),
                        "root2": .string(proof.newRoot.base64), "proof": .hashes(proof.path),
                    ]
                }
                Console.json(output)
            }
        }
    }

    struct Prune: AsyncParsableCommand, LogSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "prune",
            abstract: "Drop the payloads of the entries before N; their leaf hashes stay, so the log still verifies.")

        @OptionGroup var log: LogOptions
        @Option(help: "Prune entries with indices below this.") var before: UInt64

        func run() async throws {
            try await reportingFailures(json: log.json, valid: true) {
                let pruned = try await log.withLog { try await $0.prune(before: before) }
                if log.json { Console.json(["pruned": .int(pruned)]) } else { Console.out("pruned \(pruned)") }
            }
        }
    }
}
