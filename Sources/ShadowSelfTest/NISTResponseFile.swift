import ShadowCore

/// A NIST CAVP response file (`.rsp`): `[Name = value]` section headers, then cases of
/// `Name = value` lines separated by blank lines; a bare `FAIL` line marks a case that must fail.
package struct NISTResponseFile {
    package struct Case {
        /// The section parameters in force (`Keylen`, `IVlen`, `Taglen`, `L`…).
        package let section: [String: String]
        package let fields: [String: String]
        package let fails: Bool

        /// A field decoded from hex (an empty value is zero bytes).
        package func bytes(_ name: String) throws -> [UInt8] {
            guard let text = fields[name] else { throw VectorFormatError("case lacks \(name)") }
            return try Hex.decode(text)
        }

        package var id: String { fields["Count"] ?? fields["COUNT"] ?? fields["Len"] ?? "?" }
    }

    package let cases: [Case]

    package init(_ text: String) {
        var cases: [Case] = []
        var section: [String: String] = [:]
        var fields: [String: String] = [:]
        var fails = false
        var sectionOpen = false
        func flush() {
            if !fields.isEmpty { cases.append(Case(section: section, fields: fields, fails: fails)) }
            fields = [:]
            fails = false
        }
        // CAVP files use CRLF, which Swift reads as one Character: split on any newline.
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            let line = rawLine.trimmingCharacters(in: [" ", "\r", "\t"])
            if line.isEmpty {
                flush()
                continue
            }
            if line.hasPrefix("#") { continue }
            if line.hasPrefix("[") && line.hasSuffix("]") {
                flush()
                if !sectionOpen { section = [:] }
                sectionOpen = true
                let inner = line.dropFirst().dropLast()
                let parts = inner.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: [" "]) }
                section[parts[0]] = parts.count > 1 ? parts[1] : ""
                continue
            }
            sectionOpen = false
            if line == "FAIL" {
                fails = true
                continue
            }
            let parts = line.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: [" "]) }
            fields[parts[0]] = parts.count > 1 ? parts[1] : ""
        }
        flush()
        self.cases = cases
    }
}

extension StringProtocol {
    func trimmingCharacters(in set: Set<Character>) -> String {
        var slice = Substring(self)
        while let first = slice.first, set.contains(first) { slice.removeFirst() }
        while let last = slice.last, set.contains(last) { slice.removeLast() }
        return String(slice)
    }
}
