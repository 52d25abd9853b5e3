import Foundation
import Testing

@testable import KeyfobServer

/// Each setting is declared once (`Setting.all`); these pin down that every one of them arrives the
/// same way from its flag, its variable and the config file, and is in `--help` and the docs.
@Suite struct SettingsTests {
    /// A value of the setting's kind that differs from every default.
    static func sample(_ setting: Setting) -> (flag: [String], variable: String, json: Any) {
        switch (setting.kind, setting.name) {
        case (.text, "user-verification"): return (["preferred"], "preferred", "preferred")
        case (.text, "master-key"):
            let key = Data(repeating: 7, count: 32).base64EncodedString()
            return ([key], key, key)
        case (.text, _): return (["sample-\(setting.name)"], "sample-\(setting.name)", "sample-\(setting.name)")
        case (.number, _): return (["17"], "17", 17)
        case (.list, "bench-without"): return (["log"], "log", ["log"])
        case (.list, _): return (["wss://a.example", "wss://b.example"], "wss://a.example, wss://b.example", ["wss://a.example", "wss://b.example"])
        case (.flag, _): return ([], "1", true)
        }
    }

    static func configFile(_ object: [String: Any]) throws -> String {
        let path = NSTemporaryDirectory() + "keyfob-settings-\(UUID().uuidString).json"
        try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test(arguments: Setting.all.filter { $0.name != "config" }.map(\.name))
    func everySettingArrivesTheSameWayFromEachSource(name: String) throws {
        let setting = try #require(Setting.named(name))
        let sample = Self.sample(setting)
        let untouched = String(reflecting: ServerConfiguration())
        var results: [String] = []
        if setting.sources.contains(.flag) {
            let arguments = sample.flag.isEmpty ? [setting.flag] : sample.flag.flatMap { [setting.flag, $0] }
            results.append(String(reflecting: try ServerConfiguration.resolve(arguments: arguments, environment: [:])))
        }
        if setting.sources.contains(.environment) {
            results.append(String(reflecting: try ServerConfiguration.resolve(arguments: [], environment: [setting.variable: sample.variable])))
        }
        if setting.sources.contains(.file) && !setting.hidden {
            let path = try Self.configFile([setting.name: sample.json])
            defer { unlink(path) }
            results.append(String(reflecting: try ServerConfiguration.resolve(arguments: ["--config", path], environment: [:])))
        }
        #expect(!results.isEmpty)
        for result in results {
            #expect(result != untouched, "\(name) changed nothing in ServerConfiguration")
            #expect(result == results[0], "\(name) differs between its sources")
        }
    }

    /// A default is written twice: its value in `ServerConfiguration` and its text in the settings
    /// table (`--help`, docs/configuration.md). Every default that is a plain value, given as the
    /// flag, must leave the configuration exactly as `ServerConfiguration()` has it.
    @Test func everyLiteralDefaultInTheTableIsTheConfigurationsOwn() throws {
        var checked: [String] = []
        for setting in Setting.all where setting.sources.contains(.flag) && !setting.hidden {
            guard let text = setting.defaultValue else { continue }
            switch setting.kind {
            case .number: guard Int(text) != nil else { continue }
            case .text: guard !text.contains(" "), !text.contains("<"), !text.contains(",") else { continue }
            case .list, .flag: continue
            }
            let given = try ServerConfiguration.resolve(arguments: [setting.flag, text], environment: [:])
            #expect(
                String(reflecting: given) == String(reflecting: ServerConfiguration()),
                "\(setting.flag): the settings table says \(text), ServerConfiguration() has another value")
            checked.append(setting.name)
        }
        // The table's descriptive defaults ("--port + 10", "a quarter of the HTTP share") are the
        // rest; the literal ones are most of it.
        #expect(checked.count >= 15, "\(checked)")
    }

    @Test func flagsBeatVariablesAndVariablesBeatTheFile() throws {
        let path = try Self.configFile(["port": 1111, "host": "10.0.0.1", "rp-name": "From file"])
        defer { unlink(path) }
        let c = try ServerConfiguration.resolve(
            arguments: ["--config", path, "--port", "3333"],
            environment: ["KEYFOB_PORT": "2222", "KEYFOB_HOST": "10.0.0.2"])
        #expect(c.port == 3333)
        #expect(c.host == "10.0.0.2")
        #expect(c.rpName == "From file")
    }

    @Test func aConfigFileMayNameRelays() throws {
        let path = try Self.configFile(["relay": ["wss://relay.example.com"]])
        defer { unlink(path) }
        let c = try ServerConfiguration.resolve(arguments: ["--config", path], environment: [:])
        #expect(c.relays == ["wss://relay.example.com"])
    }

    @Test func badInputIsRefusedWithTheSettingsName() throws {
        func message(_ arguments: [String], _ environment: [String: String] = [:]) -> String {
            do {
                _ = try ServerConfiguration.resolve(arguments: arguments, environment: environment).validate()
                return ""
            } catch { return error.description }
        }
        #expect(message(["--prot", "9"]).contains("unknown option --prot"))
        #expect(message(["--port"]).contains("--port needs a value"))
        #expect(message(["--port", "x"]).contains("--port x is not a whole number"))
        #expect(message(["--port", "70000"]).contains("--port 70000 must be between 1 and 65535"))
        #expect(message([], ["KEYFOB_SESSION_TTL": "10"]).contains("--session-ttl 10 must be at least 60 seconds"))
        #expect(message([], ["KEYFOB_CONFIRM_WITH_PASSKEY": "maybe"]).contains("KEYFOB_CONFIRM_WITH_PASSKEY=maybe"))
        #expect(message(["--relay", "https://x"]).contains("must be a relay URL"))
        #expect(message(["bare"]).contains("unexpected \"bare\""))
        let unknown = try Self.configFile(["prot": 9])
        defer { unlink(unknown) }
        #expect(message(["--config", unknown]).contains("unknown key \"prot\""))
        let wrongType = try Self.configFile(["port": "9"])
        defer { unlink(wrongType) }
        #expect(message(["--config", wrongType]).contains("\"port\" must be a whole number"))
        // The master key is never a flag: `ps` would show it.
        #expect(message(["--master-key", "x"]).contains("unknown option --master-key"))
    }

    @Test func helpNamesEveryVisibleSetting() {
        let help = SettingsReference.helpText
        for setting in Setting.all where !setting.hidden {
            #expect(help.contains(setting.variable), "\(setting.name)")
            if setting.sources.contains(.flag) { #expect(help.contains("  " + setting.flag), "\(setting.name)") }
        }
        #expect(!help.contains("--bench-echo"))
        for line in help.split(separator: "\n") { #expect(line.count <= 80, "\(line)") }
    }

    /// docs/configuration.md's table is generated: `make docs` rewrites it.
    @Test func theConfigurationDocIsCurrent() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/configuration.md").path
        let document = try String(contentsOfFile: path, encoding: .utf8)
        let current = try #require(SettingsReference.updating(document), "docs/configuration.md lost its settings markers")
        if ProcessInfo.processInfo.environment["KEYFOB_UPDATE_DOCS"] == "1" {
            try current.write(toFile: path, atomically: true, encoding: .utf8)
        }
        #expect(current == document, "docs/configuration.md is not current: run make docs")
        for setting in Setting.all where !setting.hidden {
            #expect(document.contains("`\(setting.variable)`"), "\(setting.name)")
        }
    }
}
