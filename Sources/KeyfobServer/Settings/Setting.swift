import Foundation

/// One setting of `keyfob serve`, declared once: its name (the flag `--NAME` and the config-file key
/// `"NAME"`), its environment variable, its type, its default as people read it, its help, its rule
/// and where it goes in `ServerConfiguration`. The command line, the environment, the config file,
/// `keyfob serve --help` and the table in docs/configuration.md all come from `Setting.all`.
public struct Setting {
    public enum Kind: Sendable { case text, number, list, flag }

    /// Where a setting may come from (the master key never from a flag: `ps` would show it).
    public struct Sources: OptionSet, Sendable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        public static let flag = Sources(rawValue: 1)
        public static let environment = Sources(rawValue: 2)
        public static let file = Sources(rawValue: 4)
        public static let all: Sources = [.flag, .environment, .file]
    }

    /// A value as it was given, before it is checked and stored.
    public enum Value {
        case text(String), number(Int), list([String]), flag(Bool)
    }

    public let name: String
    public let variable: String
    public let kind: Kind
    /// The default as a reader wants it said (`--port + 10`), or nil when there is none.
    public let defaultValue: String?
    /// One or two sentences, shown by `--help` and in the docs.
    public let help: String
    /// What only the docs say (how it behaves with PostgreSQL, why the default is what it is).
    public let details: String?
    public let sources: Sources
    /// Load-harness switches: accepted, but in neither `--help` nor the docs.
    public let hidden: Bool
    let assign: (inout ServerConfiguration, Value) throws(ServerConfiguration.Invalid) -> Void
    /// The setting's own rule, checked on every configuration (also ones tests build directly).
    let check: (ServerConfiguration) throws(ServerConfiguration.Invalid) -> Void

    public var flag: String { "--\(name)" }
    public var isRepeatable: Bool { kind == .list }
}

// MARK: - Kinds

extension Setting {
    static func text(
        _ name: String, _ variable: String, _ path: WritableKeyPath<ServerConfiguration, String>,
        default defaultValue: String?, help: String, details: String? = nil,
        sources: Sources = .all
    ) -> Setting {
        Setting(
            name: name, variable: variable, kind: .text, defaultValue: defaultValue, help: help, details: details,
            sources: sources, hidden: false,
            assign: { c, value throws(ServerConfiguration.Invalid) in if case .text(let text) = value { c[keyPath: path] = text } },
            check: { _ throws(ServerConfiguration.Invalid) in })
    }

    static func optionalText(
        _ name: String, _ variable: String, _ path: WritableKeyPath<ServerConfiguration, String?>,
        default defaultValue: String? = nil, help: String, details: String? = nil
    ) -> Setting {
        Setting(
            name: name, variable: variable, kind: .text, defaultValue: defaultValue, help: help, details: details,
            sources: .all, hidden: false,
            assign: { c, value throws(ServerConfiguration.Invalid) in if case .text(let text) = value { c[keyPath: path] = text } },
            check: { _ throws(ServerConfiguration.Invalid) in })
    }

    /// A whole number within `range`; the message names the flag and the range.
    static func number(
        _ name: String, _ variable: String, _ path: WritableKeyPath<ServerConfiguration, Int>,
        in range: ClosedRange<Int>, unit: String = "", default defaultValue: String,
        help: String, details: String? = nil
    ) -> Setting {
        wholeNumber(
            name, variable, read: { $0[keyPath: path] }, write: { $0[keyPath: path] = $1 }, range: range, unit: unit,
            defaultValue: defaultValue, help: help, details: details)
    }

    /// A whole number that may stay unset (its default is computed from other settings).
    static func optionalNumber(
        _ name: String, _ variable: String, _ path: WritableKeyPath<ServerConfiguration, Int?>,
        in range: ClosedRange<Int>, unit: String = "", default defaultValue: String,
        help: String, details: String? = nil
    ) -> Setting {
        wholeNumber(
            name, variable, read: { $0[keyPath: path] }, write: { $0[keyPath: path] = $1 }, range: range, unit: unit,
            defaultValue: defaultValue, help: help, details: details)
    }

    private static func wholeNumber(
        _ name: String, _ variable: String, read: @escaping (ServerConfiguration) -> Int?,
        write: @escaping (inout ServerConfiguration, Int) -> Void, range: ClosedRange<Int>,
        unit: String, defaultValue: String, help: String, details: String?
    ) -> Setting {
        Setting(
            name: name, variable: variable, kind: .number, defaultValue: defaultValue, help: help, details: details,
            sources: .all, hidden: false,
            assign: { c, value throws(ServerConfiguration.Invalid) in if case .number(let n) = value { write(&c, n) } },
            check: { c throws(ServerConfiguration.Invalid) in
                if let value = read(c) { try Setting.require(value, in: range, flag: "--\(name)", unit: unit) }
            })
    }

    static func list(
        _ name: String, _ variable: String, _ path: WritableKeyPath<ServerConfiguration, [String]>,
        default defaultValue: String? = nil, help: String, details: String? = nil,
        each rule: ((String) -> String?)? = nil
    ) -> Setting {
        Setting(
            name: name, variable: variable, kind: .list, defaultValue: defaultValue, help: help, details: details,
            sources: .all, hidden: false,
            assign: { c, value throws(ServerConfiguration.Invalid) in if case .list(let items) = value { c[keyPath: path] = items } },
            check: { c throws(ServerConfiguration.Invalid) in
                guard let rule else { return }
                for item in c[keyPath: path] {
                    if let problem = rule(item) { throw .init(description: "--\(name) \"\(item)\" \(problem)") }
                }
            })
    }

    static func flag(
        _ name: String, _ variable: String, _ path: WritableKeyPath<ServerConfiguration, Bool>,
        help: String, details: String? = nil
    ) -> Setting {
        Setting(
            name: name, variable: variable, kind: .flag, defaultValue: "off", help: help, details: details,
            sources: .all, hidden: false,
            assign: { c, value throws(ServerConfiguration.Invalid) in if case .flag(let on) = value { c[keyPath: path] = on } },
            check: { _ throws(ServerConfiguration.Invalid) in })
    }

    /// A setting whose value is translated on the way in (`--user-verification`, the master key).
    static func custom(
        _ name: String, _ variable: String, kind: Kind, default defaultValue: String?, help: String,
        details: String? = nil, sources: Sources = .all, hidden: Bool = false,
        assign: @escaping (inout ServerConfiguration, Value) throws(ServerConfiguration.Invalid) -> Void
    )
        -> Setting
    {
        Setting(
            name: name, variable: variable, kind: kind, defaultValue: defaultValue, help: help, details: details,
            sources: sources, hidden: hidden, assign: assign, check: { _ throws(ServerConfiguration.Invalid) in })
    }

    func hiding() -> Setting {
        Setting(
            name: name, variable: variable, kind: kind, defaultValue: defaultValue, help: help, details: details,
            sources: sources, hidden: true, assign: assign, check: check)
    }

    static func require(_ value: Int, in range: ClosedRange<Int>, flag: String, unit: String) throws(ServerConfiguration.Invalid) {
        guard !range.contains(value) else { return }
        let unitText = unit.isEmpty ? "" : " \(unit)"
        if range.upperBound == Int.max {
            throw .init(description: "\(flag) \(value) must be at least \(range.lowerBound)\(unitText)")
        }
        throw .init(description: "\(flag) \(value) must be between \(range.lowerBound) and \(range.upperBound)\(unitText)")
    }
}
