import ShadowKeysCommands

/// `shadow-keys`: the command line for scripts (Docs/cli.md lists its commands).
@main
struct Entrypoint {
    static func main() async {
        await ShadowKeysCommand.main()
    }
}
