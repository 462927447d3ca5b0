import Foundation
import Testing

/// Every reference to a section of a document in Docs/ (`Docs/sessions.md, "Tables"`, or a list:
/// `"Refresh tokens", "The key ring" and "Tables"`), in the documents, the sources, the tests, the
/// scripts, the README and the CHANGELOG, names a heading that document has: a reader sent to a
/// section finds it.
@Suite struct DocumentReferenceTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The headings of a Markdown file, outside fenced code.
    static func headings(_ text: String) -> Set<String> {
        var fenced = false
        var found: Set<String> = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { fenced.toggle() }
            guard !fenced, line.hasPrefix("#") else { continue }
            found.insert(String(line.drop { $0 == "#" }).trimmingCharacters(in: .whitespaces))
        }
        return found
    }

    /// The files whose text may refer to a document's section.
    static func files() throws -> [URL] {
        let manager = FileManager.default
        var files = ["README.md", "CHANGELOG.md"].map { root.appendingPathComponent($0) }
        for folder in ["Docs", "Sources", "Tests", "Scripts", "FuzzTesting/Sources", "Benchmarks/Sources"] {
            let url = root.appendingPathComponent(folder)
            guard let walker = manager.enumerator(at: url, includingPropertiesForKeys: [.isRegularFileKey]) else {
                continue
            }
            for case let file as URL in walker
            where (try file.resourceValues(forKeys: [.isRegularFileKey])).isRegularFile == true {
                if ["swift", "md", ""].contains(file.pathExtension) { files.append(file) }
            }
        }
        return files
    }

    /// (document, section) for every reference in `text`, line breaks inside comments joined.
    static func references(in text: String) throws -> [(document: String, section: String)] {
        let joined = try NSRegularExpression(pattern: #"\n[ \t]*(?:///|//|#|\*)?[ \t]*"#)
            .stringByReplacingMatches(
                in: text, range: NSRange(text.startIndex..., in: text), withTemplate: " ")
        let reference = try NSRegularExpression(
            pattern: #"([A-Za-z0-9-]+\.md), ((?:"[^"\n]+"(?:, (?:and )?| and )?)+)"#)
        let quoted = try NSRegularExpression(pattern: #""([^"\n]+)""#)
        var found: [(String, String)] = []
        for match in reference.matches(in: joined, range: NSRange(joined.startIndex..., in: joined)) {
            guard let document = Range(match.range(at: 1), in: joined),
                let list = Range(match.range(at: 2), in: joined)
            else { continue }
            let names = String(joined[list])
            for name in quoted.matches(in: names, range: NSRange(names.startIndex..., in: names)) {
                if let range = Range(name.range(at: 1), in: names) {
                    found.append((String(joined[document]), String(names[range])))
                }
            }
        }
        return found
    }

    @Test func everySectionReferenceNamesAHeading() throws {
        let docs = Self.root.appendingPathComponent("Docs")
        var headings: [String: Set<String>] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: docs.path) where name.hasSuffix(".md") {
            headings[name] = Self.headings(
                try String(contentsOf: docs.appendingPathComponent(name), encoding: .utf8))
        }
        #expect(headings.count >= 10)
        var checked = 0
        for file in try Self.files() {
            guard let text = try? String(contentsOf: file, encoding: .utf8) else { continue }
            for (document, section) in try Self.references(in: text) {
                guard let known = headings[document] else { continue }
                checked += 1
                #expect(
                    known.contains(section),
                    """
                    \(file.path.dropFirst(Self.root.path.count + 1)) refers to \(document), "\(section)", which has \
                    no such heading
                    """)
            }
        }
        // The references this project makes: a pattern that stopped matching would check nothing.
        #expect(checked >= 100, "only \(checked) section references found")
    }

    /// The reader of references finds wrapped ones and lists, so the check above cannot pass by
    /// missing them.
    @Test func referencesAreFoundAcrossLinesAndInLists() throws {
        let text = """
            /// as the session rows are (Docs/sessions.md,
            /// "Tables"); see Docs/apple.md, "Errors", "TLS" and "Client secret".
            """
        let found = try Self.references(in: text).map { "\($0.document): \($0.section)" }
        #expect(
            found == ["sessions.md: Tables", "apple.md: Errors", "apple.md: TLS", "apple.md: Client secret"])
    }
}
