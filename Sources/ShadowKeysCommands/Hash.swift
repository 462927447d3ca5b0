import ArgumentParser
#if canImport(Darwin)
import Darwin
#else
import Glibc
#endif
import ShadowCore
import ShadowCrypto

struct Hash: AsyncParsableCommand, QuietCommand {
    static let configuration = CommandConfiguration(
        commandName: "hash",
        abstract: "SHA-256 (or HMAC-SHA256) of files, in sha256sum format; --check verifies a manifest.",
        discussion: """
            Output lines are `<hex>  <name>` as sha256sum writes them. With --check MANIFEST, each \
            listed file is hashed and reported `name: OK` or `name: FAILED` (`FAILED open or read` \
            when it cannot be read); the exit status is 1 if any file failed, as with sha256sum -c. \
            With --hmac-key-file the digest is HMAC-SHA256: use it for hashes stored beside \
            ciphertext, where a plain hash would reveal equal plaintexts.
            """
    )

    @Argument(help: "Files to hash; '-' or none for stdin.")
    var files: [String] = []

    @Option(help: "Verify the digests listed in this manifest ('-' for stdin).")
    var check: String?

    @Option(name: .customLong("hmac-key-file"), help: "Compute HMAC-SHA256 with this key instead of SHA-256.")
    var hmacKeyFile: String?

    @Flag(help: "Print digests in base64 instead of hex (not sha256sum-compatible).")
    var base64 = false

    @Flag(name: .shortAndLong, help: "Print no warnings; with --check, print only failures.")
    var quiet = false

    @Flag(help: "With --check, print nothing; the exit status says it all.")
    var status = false

    func validate() throws {
        if check != nil && !files.isEmpty {
            throw ValidationError("--check takes the manifest only; do not list files")
        }
        if status && check == nil { throw ValidationError("--status applies to --check") }
        if base64 && check != nil { throw ValidationError("--check reads hex manifests") }
    }

    func run() async throws {
        var failed = false
        try await reportingFailures(json: false) {
            // The HMAC key is the file's bytes as they are (any length but empty).
            let key = try hmacKeyFile.map { path -> SecretBytes in
                let bytes = try SecretInput(origin: .file(path), what: "HMAC key").bytes(limit: 1 << 16)
                guard !bytes.isEmpty else { throw CLIError(.usage, "the HMAC key file is empty") }
                return SecretBytes(bytes)
            }
            if let check {
                failed = try verify(manifest: check, key: key)
                return
            }
            for name in files.isEmpty ? ["-"] : files {
                do {
                    let digest = try self.digest(of: name, key: key)
                    Console.out(Self.line(digest: digest, name: name, base64: base64, terminal: isatty(1) == 1))
                } catch let error as FileError {
                    Console.err("shadow-keys: \(error)")
                    failed = true
                }
            }
        }
        if failed { throw ExitCode(1) }
    }

    private func digest(of name: String, key: SecretBytes?) throws -> [UInt8] {
        try digest(ofPath: Array(name.utf8), key: key)
    }

    /// The digest of the file whose path is these bytes (a manifest's names are bytes, not
    /// necessarily UTF-8); `-` is stdin.
    private func digest(ofPath path: [UInt8], key: SecretBytes?) throws -> [UInt8] {
        let shown = Self.display(path)
        guard !path.contains(0) else { throw FileError("open", shown, errno: EINVAL) }
        let fd: Int32 =
            path == [UInt8(ascii: "-")]
            ? 0
            : (path.map { CChar(bitPattern: $0) } + [0]).withUnsafeBufferPointer { name -> Int32 in
                guard let name = name.baseAddress else { return -1 }
                return open(name, O_RDONLY | O_CLOEXEC)
            }
        guard fd >= 0 else { throw FileError("open", shown) }
        defer { if fd > 0 { close(fd) } }
        do {
            if let key { return try Integrity.hmacSHA256(key: key, fileDescriptor: fd) }
            return try Integrity.sha256(fileDescriptor: fd)
        } catch {
            throw FileError("read", shown)
        }
    }

    /// A name for messages and reports: invalid UTF-8 shown as U+FFFD, terminal controls escaped.
    static func display(_ name: [UInt8]) -> String {
        String(decoding: name, as: UTF8.self).terminalSafe
    }

    /// A sha256sum line (escaped as GNU sha256sum escapes names); on a terminal, other control
    /// characters are escaped too.
    static func line(digest: [UInt8], name: String, base64: Bool, terminal: Bool) -> String {
        let line: String
        if base64 {
            line = "\(Integrity.base64(digest))  \(name)"
        } else {
            line = String(decoding: ChecksumManifest.format(digest: digest, name: Array(name.utf8)), as: UTF8.self)
        }
        return terminal ? line.terminalSafe : line
    }

    /// sha256sum -c: returns true when anything failed. A name that holds a NUL byte cannot name
    /// a file, so it fails (it is never cut short and another file hashed in its place).
    private func verify(manifest: String, key: SecretBytes?) throws -> Bool {
        let bytes: [UInt8]
        if manifest == "-" {
            guard let input = try Files.readAll(0, limit: 64 << 20, path: "stdin") else {
                throw CLIError(.usage, "manifest too large")
            }
            bytes = input
        } else {
            guard let input = try Files.read(manifest, limit: 64 << 20) else {
                throw CLIError(.usage, "manifest too large")
            }
            bytes = input
        }
        let (lines, malformed) = ChecksumManifest.parse(manifest: bytes)
        var mismatched = 0, unreadable = 0
        for line in lines {
            let (expected, name) = (line.digest, line.name)
            let shown = Self.display(name)
            do {
                let actual = try digest(ofPath: name, key: key)
                if Integrity.matches(actual, expected) {
                    if !quiet && !status { Console.out("\(shown): OK") }
                } else {
                    mismatched += 1
                    if !status { Console.out("\(shown): FAILED") }
                }
            } catch {
                unreadable += 1
                if !status {
                    Console.err(
                        name.contains(0)
                            ? "shadow-keys: \(shown): a file name cannot contain a NUL byte" : "shadow-keys: \(error)")
                    Console.out("\(shown): FAILED open or read")
                }
            }
        }
        guard !lines.isEmpty else {
            throw CLIError(.failure, "\(manifest): no properly formatted SHA-256 checksum lines found")
        }
        if !status {
            func plural(_ count: Int, _ one: String, _ many: String) -> String { count == 1 ? one : many }
            if malformed > 0 {
                Console.err(
                    """
                    shadow-keys: WARNING: \(malformed) \(plural(malformed, "line is", "lines are")) improperly \
                    formatted
                    """
                )
            }
            if unreadable > 0 {
                Console.err(
                    """
                    shadow-keys: WARNING: \(unreadable) listed \(plural(unreadable, "file", "files")) could not be \
                    read
                    """
                )
            }
            if mismatched > 0 {
                Console.err(
                    """
                    shadow-keys: WARNING: \(mismatched) computed \(plural(mismatched, "checksum", "checksums")) did \
                    NOT match
                    """
                )
            }
        }
        return mismatched > 0 || unreadable > 0
    }
}
