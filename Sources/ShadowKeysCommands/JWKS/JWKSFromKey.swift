import ArgumentParser
import ShadowCore
import ShadowJOSE

extension JWKSCommand {
    struct FromKey: AsyncParsableCommand, QuietCommand {
        static let configuration = CommandConfiguration(
            commandName: "from-key",
            abstract: "Print the public JWK Set of a key file (PEM, .p8 or JWK; private or public).",
            discussion:
                """
                The kid is --kid, else the key's RFC 7638 thumbprint, the one 'sign' uses. Exit 0, 65 an unusable \
                key, 66 a file that cannot be read.
                """
        )

        @Argument(help: ArgumentHelp("The key file.", valueName: "file"))
        var file: String

        @Option(help: "The kid to give the key. Default: its RFC 7638 thumbprint.")
        var kid: String?

        @Flag(name: .shortAndLong, help: "Print no warnings on stderr.") var quiet = false

        func validate() throws {
            if let kid, kid.isEmpty || kid.utf8.count > 256 { throw ValidationError("--kid: 1 to 256 bytes") }
        }

        func run() async throws {
            try await reportingFailures(json: false) {
                let read: [UInt8]?
                do { read = try Files.read(file, limit: 64 * 1024) } catch let error as FileError {
                    throw CLIError(.noInput, code: "io", "cannot read the key file: \(error)")
                }
                guard let bytes = read else {
                    throw CLIError(.malformedInput, "\(file.terminalSafe) exceeds 64 KiB; it is not a key")
                }
                // A public key may be world-readable; a private one should not be.
                if String(decoding: bytes.prefix(4096), as: UTF8.self).contains("PRIVATE KEY")
                    || (try? StrictJSON.parse(bytes).objectValue?["d"]) != nil
                {
                    warnIfReadableByOthers(file, what: "key file")
                }
                do {
                    Console.json(.object(try KeyFiles.publicKeySet(bytes, keyID: kid)))
                } catch let error as JOSEError {
                    throw CLIError(.malformedInput, code: "invalid_key", "\(file.terminalSafe): \(error.reason)")
                }
            }
        }
    }
}
