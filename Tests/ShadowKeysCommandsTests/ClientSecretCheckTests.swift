import ArgumentParser
import Testing

@testable import ShadowKeysCommands

/// `client-secret --now` refuses what Apple refuses outright, judged against this machine's clock;
/// here the clock is fixed, so each case holds whatever the date and however long a run takes.
@Suite struct ClientSecretCheckTests {
    static let clock = 1_800_000_000.0
    static let sixMonths = 15_777_000

    @Test(
        arguments: [
            (clock + 61, 3600, "in the future"),
            (clock + 86_400 * 30, 3600, "in the future"),
            (clock + 30, sixMonths, "six months"),
            (clock + 1, sixMonths, "six months"),
            (clock - 100, sixMonths + 200, "six months"),
        ] as [(Double, Int, String)])
    func refused(issued: Double, ttl: Int, reason: String) {
        let error = #expect(throws: ValidationError.self) {
            try ClientSecretCommand.check(issued: issued, ttl: ttl, clock: Self.clock)
        }
        #expect(error?.message.contains(reason) == true, "\(String(describing: error))")
    }

    @Test(
        arguments: [
            (clock, sixMonths), (clock + 60, 3600), (clock - 1, sixMonths), (1_700_000_000.0, sixMonths),
            (clock, 86_400),
        ] as [(Double, Int)])
    func accepted(issued: Double, ttl: Int) throws {
        try ClientSecretCommand.check(issued: issued, ttl: ttl, clock: Self.clock)
    }
}
