import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ShadowCore
import ShadowOperationLog

extension LogCommand {
    struct Append: AsyncParsableCommand, LogSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "append",
            abstract: "Append one operation, or JSON lines of them (--from FILE or -), as one durable batch.",
            discussion: """
                A JSON line is {"operation","provider","entityType","entityId","success","error","time","details"}; \
                time is RFC 3339 or epoch seconds (default: now), error and details are optional. Every line is \
                checked before anything is written: a bad line writes nothing (exit 65, naming the line).
                """)

        @OptionGroup var log: LogOptions
        @Option(help: "upload, download, delete… (1 to 64 printable ASCII characters).") var operation: String?
        @Option(help: "icloud, google-drive…") var provider: String?
        @Option(name: .customLong("entity-type"), help: "file, record…") var entityType: String?
        @Option(name: .customLong("entity-id"), help: "Which entity (sealed in the log).") var entityID: String?
        @Flag(help: "The operation failed.") var failed = false
        @Option(help: "Why it failed (sealed; implies --failed).") var error: String?
        @Option(help: "When: RFC 3339 or epoch seconds (default: now).") var time: String?
        @Option(help: "A JSON object kept with the entry, in clear.") var details: String?
        @Option(help: "Read JSON lines of entries from FILE (- for stdin) instead.") var from: String?
        @Option(help: "A new log's name (a schema-less URL such as example.com/sync-log).") var origin: String?

        func validate() throws {
            if from != nil {
                guard [operation, provider, entityType, entityID, error, time, details].allSatisfy({ $0 == nil }),
                    !failed
                else { throw ValidationError("--from reads whole entries: give no entry options with it") }
                if from == "-", log.key.keyUsesStdin {
                    throw ValidationError("--from - and a key from stdin cannot share stdin")
                }
            } else {
                guard operation != nil, provider != nil, entityType != nil, entityID != nil else {
                    throw ValidationError("give --operation, --provider, --entity-type and --entity-id (or --from)")
                }
                // The entry's own checks, here, so a refusal is reported with this command's usage.
                _ = try single()
            }
        }

        func run() async throws {
            try await reportingFailures(json: log.json, valid: true) {
                let entries = try from.map(Self.readLines) ?? [try single()]
                let appended = try await log.withLog(create: true, origin: origin) { log in
                    var range: Range<UInt64>?
                    for chunk in stride(from: 0, to: entries.count, by: 10_000) {
                        let part = try await log.append(
                            contentsOf: Array(entries[chunk..<min(chunk + 10_000, entries.count)]))
                        range = (range?.lowerBound ?? part.lowerBound)..<part.upperBound
                    }
                    return (range ?? 0..<0, try await log.checkpoint().checkpoint)
                }
                if log.json {
                    Console.json([
                        "first": .int(appended.0.lowerBound), "count": .int(appended.0.count),
                        "checkpoint": .checkpoint(appended.1),
                    ])
                } else {
                    Console.out(
                        "appended \(appended.0.count) (entries \(appended.0.lowerBound)..<\(appended.0.upperBound))")
                }
            }
        }

        func single() throws -> OperationEntry {
            var detailsObject: JSONObject?
            if let details {
                switch StrictJSON.object(Array(details.utf8), limits: .jose) {
                case .success(let object): detailsObject = object
                case .failure(let what): throw ValidationError("--details is \(what)")
                }
            }
            let entry = OperationEntry(
                operation: operation ?? "", provider: provider ?? "", entityType: entityType ?? "",
                entityID: entityID ?? "",
                time: try time.map { try Self.milliseconds(parseTime($0, option: "--time")) } ?? Self.now(),
                success: !failed && error == nil, error: error, details: detailsObject)
            do { try entry.validate() } catch let error as LogError { throw ValidationError(error.reason) }
            return entry
        }

        static func now() throws -> Int64 {
            guard let now = Timestamp(Date()) else { throw CLIError(.failure, "the clock is out of range") }
            return try milliseconds(now)
        }

        static func milliseconds(_ time: Timestamp) throws -> Int64 {
            guard OperationEntry.timeRange.contains(time.milliseconds) else {
                throw ValidationError("the time is before 1970")
            }
            return time.milliseconds
        }

        /// Every line, checked; the first bad one is exit 65 naming its number.
        static func readLines(_ path: String) throws -> [OperationEntry] {
            let input = try InputFile(path)
            defer { input.close() }
            guard let bytes = try Files.readAll(input.fd, limit: 1 << 30, path: input.name) else {
                throw CLIError(.malformedInput, "\(input.name) is over 1 GiB")
            }
            var entries: [OperationEntry] = []
            for (number, line) in bytes.split(separator: 0x0A, omittingEmptySubsequences: false).enumerated()
            where !line.isEmpty {
                do {
                    entries.append(try entry(line))
                } catch let error as LogError {
                    throw CLIError(.malformedInput, "line \(number + 1): \(error.reason)")
                } catch let error as JSONParseError {
                    throw CLIError(.malformedInput, "line \(number + 1): \(error)")
                }
            }
            guard !entries.isEmpty else { throw CLIError(.malformedInput, "\(input.name) holds no entries") }
            return entries
        }

        static func entry(_ line: ArraySlice<UInt8>) throws -> OperationEntry {
            guard case .object(let object) = try StrictJSON.parse(line, limits: .jose) else {
                throw LogError(.invalidParameter, "not a JSON object")
            }
            let known = ["operation", "provider", "entityType", "entityId", "success", "error", "time", "details"]
            for member in object where !known.contains(member.name) {
                throw LogError(.invalidParameter, "unknown member \(member.name.quotedForMessage)")
            }
            func text(_ name: String) throws -> String {
                guard let value = object[name]?.stringValue else {
                    throw LogError(.invalidParameter, "\(name) is missing or not a string")
                }
                return value
            }
            guard let success = object["success"]?.boolValue else {
                throw LogError(.invalidParameter, "success is missing or not true or false")
            }
            var time = try now()
            if let value = object["time"] {
                guard let string = value.stringValue ?? (value.numberLiteral),
                    let stamp = try? Timestamp.parse(string), OperationEntry.timeRange.contains(stamp.milliseconds)
                else { throw LogError(.invalidParameter, "time is not RFC 3339 or epoch seconds from 1970 on") }
                time = stamp.milliseconds
            }
            var error: String?
            if let value = object["error"], value != .null {
                guard let string = value.stringValue else { throw LogError(.invalidParameter, "error is not a string") }
                error = string
            }
            var details: JSONObject?
            if let value = object["details"], value != .null {
                guard let object = value.objectValue else {
                    throw LogError(.invalidParameter, "details is not a JSON object")
                }
                details = object
            }
            let entry = OperationEntry(
                operation: try text("operation"), provider: try text("provider"), entityType: try text("entityType"),
                entityID: try text("entityId"), time: time, success: success, error: error, details: details)
            try entry.validate()
            return entry
        }
    }
}

extension JSONValue {
    /// A number's literal text.
    fileprivate var numberLiteral: String? {
        if case .number(let number) = self { return number.literal }
        return nil
    }
}
