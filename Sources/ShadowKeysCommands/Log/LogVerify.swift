import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowCredentials
import ShadowOperationLog

extension LogCommand {
    struct Verify: AsyncParsableCommand, LogSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "verify",
            abstract: "Check the whole log; with --witness FILE, also that nothing went back since the last check.",
            discussion: """
                The witness file (kept apart from the log: another disk, another machine's mount) remembers the \
                last checkpoint accepted and, when --vault and --state are given, the vault's generation and the \
                state store's audit head. A log, vault or state store older than the witness is exit 36 \
                (rolled_back); the witness then keeps what it had.
                """)

        @OptionGroup var log: LogOptions
        @Option(help: "The witness file: read, checked against, then updated.") var witness: String?
        @Option(help: "A state store whose audit head the witness watches (sqlite:PATH or vault:PATH).")
        var state: String?

        func validate() throws {
            if state != nil || log.key.explicitPath != nil, witness == nil {
                throw ValidationError("--vault and --state are watched by a witness: give --witness FILE")
            }
            if let state { _ = try StoreLocation(parsing: state, option: "--state") }
        }

        func run() async throws {
            try await reportingFailures(json: log.json, valid: true) {
                let (report, previous) = try await log.withLog { opened -> (LogVerification, WitnessRecord?) in
                    let report = try await opened.verify()
                    guard let witness else { return (report, nil) }
                    let vault = try log.key.explicitPath.map { try VaultMark.read(path: $0) }
                    let keeper = Witness(path: witness, keys: opened.storage.keys)
                    if let state {
                        var store = StoreOptions()
                        store.url = state
                        store.vault = log.key
                        store.vault.explicitPath = nil
                        let previous = try await store.withStore(create: false) { store in
                            try await keeper.check(opened, vault: vault) { at in
                                let mark = try await store.auditMark(entry: at)
                                return (StateMark(count: mark.count, last: mark.last), mark.entryDigest)
                            }
                        }
                        return (report, previous)
                    }
                    return (report, try await keeper.check(opened, vault: vault))
                }
                if log.json {
                    var object: JSONObject = [
                        "valid": true, "size": .int(report.size), "root": .string(report.root.base64),
                        "pruned": .int(report.pruned), "checkpoints": .int(report.checkpoints),
                    ]
                    if witness != nil { object.set("witnessSize", previous.map { .int($0.size) } ?? .null) }
                    Console.json(.object(object))
                } else {
                    Console.out("ok: \(report.size) entries (\(report.pruned) pruned), root \(report.root.base64)")
                }
            }
        }
    }
}
