/// What `keyfob serve --help` and docs/configuration.md say of the settings, both from `Setting.all`.
public enum SettingsReference {
    /// The settings part of `keyfob serve --help`.
    public static var helpText: String {
        var lines = wrapped(
            "SETTINGS (flag, environment variable, default; a list repeats its flag, or takes commas in its variable):", width: 78, indent: "")
        lines.append("")
        for setting in Setting.all where !setting.hidden {
            var head = setting.sources.contains(.flag) ? "\(setting.flag)" : "(no flag)"
            if setting.kind != .flag && setting.sources.contains(.flag) { head += " <\(placeholder(setting))>" }
            if setting.isRepeatable { head += " (repeatable)" }
            var where_ = "env: \(setting.variable)"
            if let defaultValue = setting.defaultValue { where_ += "; default \(defaultValue)" }
            lines.append("  \(head)")
            lines += wrapped("\(setting.help) (\(where_))", width: 78, indent: "        ")
        }
        return lines.joined(separator: "\n")
    }

    /// `text` in lines of at most `width` characters, each indented (ArgumentParser would wrap
    /// long lines itself, but back to the first column).
    static func wrapped(_ text: String, width: Int, indent: String) -> [String] {
        var lines: [String] = []
        var line = indent
        for word in text.split(separator: " ") {
            if line.count > indent.count && line.count + 1 + word.count > width {
                lines.append(line)
                line = indent
            }
            line += (line.count > indent.count ? " " : "") + word
        }
        if line.count > indent.count { lines.append(line) }
        return lines
    }

    /// One setting's help as the operator commands' `--help` shows it.
    public static func helpLine(_ name: String) -> String {
        guard let setting = Setting.named(name) else { return "" }
        return "\(setting.help) (env: \(setting.variable)\(setting.defaultValue.map { "; default \($0)" } ?? ""))"
    }

    private static func placeholder(_ setting: Setting) -> String {
        switch setting.kind {
        case .number: "n"
        case .list, .text: setting.name.split(separator: "-").last.map(String.init) ?? "value"
        case .flag: ""
        }
    }

    static let beginMarker = "<!-- settings: generated from Sources/KeyfobServer/Settings/Setting+all.swift by `make docs` -->"
    static let endMarker = "<!-- settings: end -->"

    /// The table of docs/configuration.md.
    public static var markdownTable: String {
        var lines = ["| flag | variable | config key | default | meaning |", "|---|---|---|---|---|"]
        for setting in Setting.all where !setting.hidden {
            let flag = setting.sources.contains(.flag) ? "`\(setting.flag)`" + (setting.isRepeatable ? " (repeat)" : "") : "—"
            var variable = "`\(setting.variable)`"
            if setting.kind == .list { variable += " (comma-separated)" }
            if setting.kind == .flag { variable += " (`1` or `0`)" }
            let key = setting.sources.contains(.file) ? "`\"\(setting.name)\"`" : "—"
            let defaultValue = setting.defaultValue.map { "`\($0)`" } ?? "—"
            let meaning = [setting.help, setting.details].compactMap { $0 }.joined(separator: " ")
            lines.append("| \(flag) | \(variable) | \(key) | \(defaultValue) | \(escaped(meaning)) |")
        }
        return lines.joined(separator: "\n")
    }

    private static func escaped(_ text: String) -> String { text.replacingOccurrences(of: "|", with: "\\|") }

    /// `document` with the text between the markers replaced by the current table; nil without markers.
    public static func updating(_ document: String) -> String? {
        guard let begin = document.range(of: beginMarker), let end = document.range(of: endMarker),
            begin.upperBound <= end.lowerBound
        else { return nil }
        return String(document[..<begin.upperBound]) + "\n" + markdownTable + "\n" + String(document[end.lowerBound...])
    }
}
