import ArgumentParser
import ShadowCore
import ShadowCredentials

extension StateCommand {
    struct ApplyEvents: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "apply-events",
            abstract: "Apply a JSON-lines backlog of events, in batches.",
            discussion: """
                One object a line: \
                {"kind":"consent-revoked","client_id":"…","sub":"…","time_ms":…,"id":"…","linked_sub":null} \
                with a kind of the events table of Docs/credential-state.md (linked_sub names the new subject of a \
                "transferred" event and is null or absent otherwise). Every line is checked before anything is \
                applied: a bad line is exit 65, naming it, with nothing applied. Each batch is one transaction; \
                applying a backlog again changes nothing. Prints a summary (with --json: \
                {"events","applied","changed","duplicates"}), and a progress bar on a terminal.
                """)
        @Argument(help: "The JSON-lines file, or - for stdin.") var input: String
        @Option(name: .customLong("batch-size"), help: "Events per transaction (1 to 10000).") var batchSize = 1000
        @OptionGroup var store: StoreOptions
        @Flag(help: "Print JSON.") var json = false
        @Flag(name: .shortAndLong, help: "Print no warnings and draw no progress bar.") var quiet = false

        /// The largest backlog read: 1 GiB.
        static let maxInputBytes = 1 << 30

        func validate() throws {
            try store.requireKey()
            guard (1...10_000).contains(batchSize) else {
                throw ValidationError("--batch-size: 1 to 10000, not \(batchSize)")
            }
            if input == "-" && store.keyUsesStdin {
                throw ValidationError("the events come on stdin; give the passphrase another way")
            }
        }

        func run() async throws {
            try await reportingFailures(json: json) {
                let events = try Self.parse(try readInput(input, limit: Self.maxInputBytes, what: "the events"))
                let progress = Progress(verb: "applying", events: events.count, wanted: !json)
                var changed = 0
                try await store.withStore(create: true) { store in
                    var done = 0
                    for start in stride(from: 0, to: events.count, by: batchSize) {
                        let batch = Array(events[start..<min(start + batchSize, events.count)])
                        changed += try await store.apply(batch).filter(\.changed).count
                        done += batch.count
                        progress.update(done)
                    }
                }
                progress.finish()
                if json {
                    Console.json([
                        "events": .int(events.count), "applied": .int(events.count), "changed": .int(changed),
                        "duplicates": .int(events.count - changed),
                    ])
                } else {
                    Console.out(
                        """
                        applied \(events.count) events: \(changed) changed a user's state, \(events.count - changed) \
                        were duplicates or older than what was recorded
                        """
                    )
                }
            }
        }

        /// Every line as an event; exit 65 (`invalid_event`) naming the first bad line.
        static func parse(_ bytes: [UInt8]) throws -> [CredentialEvent] {
            do { return try CredentialEvent.parseLines(bytes) } catch let error as CredentialError {
                throw CLIError(.malformedInput, code: error.codeName, "\(error.reason); nothing was applied")
            }
        }
    }
}

/// A whole file or stdin: exit 66 when it cannot be opened, 65 when it exceeds `limit`.
func readInput(_ source: String, limit: Int, what: String) throws -> [UInt8] {
    do {
        let bytes =
            source == "-" ? try Files.readAll(0, limit: limit, path: "stdin") : try Files.read(source, limit: limit)
        guard let bytes else { throw CLIError(.malformedInput, "\(what) exceed \(limit) bytes") }
        return bytes
    } catch let error as FileError {
        throw CLIError(.noInput, "cannot read \(what): \(error)")
    }
}
