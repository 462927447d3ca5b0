/// The outcome of one vector.
package struct VectorCase: Sendable {
    /// The vector's id within its suite (a Wycheproof `tcId`, a COUNT, or a name).
    package let id: String
    /// Whether ShadowKeys did what the vector expects.
    package let passed: Bool
    /// What was expected and what happened, for failure reports.
    package let detail: String

    package init(id: String, passed: Bool, detail: String) {
        self.id = id
        self.passed = passed
        self.detail = detail
    }
}

/// The outcome of one suite of vectors.
package struct SuiteResult: Sendable {
    /// The module whose code the suite exercises.
    package let module: String
    /// The suite's name, usually its source file.
    package let name: String
    /// Each vector's outcome.
    package let cases: [VectorCase]
    /// Set when the suite could not run at all (file missing or unreadable).
    package let error: String?

    package init(module: String, name: String, cases: [VectorCase], error: String? = nil) {
        self.module = module
        self.name = name
        self.cases = cases
        self.error = error
    }

    /// Vectors run.
    package var run: Int { cases.count }
    /// Vectors that passed.
    package var passed: Int { cases.count { $0.passed } }
    /// True when the suite ran and every vector passed.
    package var succeeded: Bool { error == nil && !cases.isEmpty && passed == run }
}

/// A vector file that is not in the expected shape.
package struct VectorFormatError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
