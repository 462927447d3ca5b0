import ShadowKeysCommands

/// `shadow-keys`: the command line for scripts (Docs/cli.md lists its commands). A command that
/// does nothing that waits runs on the main thread (Docs/cli.md, "Start-up").
@main
struct Entrypoint {
    static func main() {
        ShadowKeysCommand.start()
    }
}
