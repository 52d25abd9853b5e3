import Foundation

extension ServerConfiguration {
    /// The configuration `keyfob serve ARGUMENTS` runs with: for each of `Setting.all`, its flag, else
    /// its `KEYFOB_*` variable, else the config file's key, else `defaults`. Every value is checked
    /// (type here, range and cross-setting rules in `validate()`); nothing unknown is ignored.
    /// `only` limits it to some settings (the operator commands need only where the database is).
    public static func resolve(
        arguments: [String], environment: [String: String],
        defaults: ServerConfiguration = ServerConfiguration(),
        only names: Set<String>? = nil
    ) throws(Invalid) -> ServerConfiguration {
        let every = Setting.all
        let settings = names.map { names in every.filter { names.contains($0.name) } } ?? every
        let flags = try parseFlags(arguments, settings: settings)
        var file: [String: Any] = [:]
        if let path = flags["config"]?.last ?? environment["KEYFOB_CONFIG"] {
            file = try readConfigFile(path, settings: every)
        }
        var c = defaults
        for setting in settings {
            let value: Setting.Value?
            if setting.sources.contains(.flag), let given = flags[setting.name] {
                value = try setting.parse(flag: given)
            } else if setting.sources.contains(.environment), let text = environment[setting.variable] {
                value = try setting.parse(variable: text)
            } else if setting.sources.contains(.file), let json = file[setting.name] {
                value = setting.parse(json: json)
            } else {
                value = nil
            }
            if let value { try setting.assign(&c, value) }
        }
        return c
    }

    /// `--name value`, `--name=value` and bare `--flag`, by name; a list's flag may repeat.
    static func parseFlags(_ arguments: [String], settings: [Setting]) throws(Invalid) -> [String: [String]] {
        var found: [String: [String]] = [:]
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            guard argument.hasPrefix("--"), argument.count > 2 else {
                throw Invalid(description: "unexpected \"\(argument)\": settings are given as --name value (keyfob serve --help lists them)")
            }
            let body = argument.dropFirst(2)
            let name = String(body.prefix { $0 != "=" })
            let inline = body.contains("=") ? String(body.drop { $0 != "=" }.dropFirst()) : nil
            guard let setting = settings.first(where: { $0.name == name && $0.sources.contains(.flag) }) else {
                throw Invalid(description: "unknown option --\(name)\(suggestion(for: name, among: settings)) (keyfob serve --help lists them)")
            }
            if setting.kind == .flag {
                found[name, default: []].append(inline ?? "true")
                continue
            }
            let value: String
            if let inline {
                value = inline
            } else {
                guard index < arguments.count else { throw Invalid(description: "--\(name) needs a value") }
                value = arguments[index]
                index += 1
            }
            found[name, default: []].append(value)
        }
        return found
    }

    private static func suggestion(for name: String, among settings: [Setting]) -> String {
        let close = settings.filter { !$0.hidden && $0.sources.contains(.flag) }
            .first {
                $0.name.hasPrefix(name) || name.hasPrefix($0.name)
                    || $0.name.replacingOccurrences(of: "-", with: "") == name.replacingOccurrences(of: "-", with: "")
            }
        return close.map { "; did you mean --\($0.name)?" } ?? ""
    }

    static func readConfigFile(_ path: String, settings: [Setting]) throws(Invalid) -> [String: Any] {
        guard let data = FileManager.default.contents(atPath: path),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else {
            throw Invalid(description: "config file \(path) is missing or not a JSON object")
        }
        let known = settings.filter { $0.sources.contains(.file) && !$0.hidden }
        for (key, value) in object.sorted(by: { $0.key < $1.key }) {
            guard let setting = known.first(where: { $0.name == key }) else {
                throw Invalid(
                    description: "config file \(path): unknown key \"\(key)\" (known: \(known.map(\.name).sorted().joined(separator: ", ")))")
            }
            guard setting.parse(json: value) != nil else {
                let expected =
                    switch setting.kind {
                    case .list: "a string or a list of strings"
                    case .number: "a whole number"
                    case .flag: "true or false"
                    case .text: "a string"
                    }
                throw Invalid(description: "config file \(path): \"\(key)\" must be \(expected)")
            }
        }
        return object
    }
}

extension Setting {
    /// The values of this setting's flag (the last one wins, a list takes them all).
    func parse(flag values: [String]) throws(ServerConfiguration.Invalid) -> Value {
        switch kind {
        case .list: return .list(values)
        case .text: return .text(values.last ?? "")
        case .number:
            let text = values.last ?? ""
            guard let number = Int(text) else { throw .init(description: "--\(name) \(text) is not a whole number") }
            return .number(number)
        case .flag:
            let text = values.last ?? "true"
            guard let on = Self.boolean(text) else { throw .init(description: "--\(name)=\(text) must be true or false") }
            return .flag(on)
        }
    }

    /// A variable's text: lists are comma-separated, flags 1/true or 0/false.
    func parse(variable text: String) throws(ServerConfiguration.Invalid) -> Value {
        switch kind {
        case .text: return .text(text)
        case .list:
            return .list(text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
        case .number:
            guard let number = Int(text.trimmingCharacters(in: .whitespaces)) else {
                throw .init(description: "\(variable)=\(text) is not a whole number")
            }
            return .number(number)
        case .flag:
            guard let on = Self.boolean(text) else { throw .init(description: "\(variable)=\(text) must be 1 or 0 (true or false)") }
            return .flag(on)
        }
    }

    /// A config-file value of the right JSON type, or nil.
    func parse(json value: Any) -> Value? {
        let number = value as? NSNumber
        let isBool = number.map { ["c", "B"].contains(String(cString: $0.objCType)) } ?? false
        switch kind {
        case .text: return (value as? String).map(Value.text)
        case .flag: return isBool ? .flag(number!.boolValue) : nil
        case .number:
            guard let number, !isBool, number.doubleValue == number.doubleValue.rounded(),
                abs(number.doubleValue) < 1e15
            else { return nil }
            return .number(number.intValue)
        case .list:
            if let text = value as? String { return .list([text]) }
            guard let items = value as? [Any], items.allSatisfy({ $0 is String }) else { return nil }
            return .list(items.compactMap { $0 as? String })
        }
    }

    private static func boolean(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "1", "true", "yes", "on": true
        case "0", "false", "no", "off", "": false
        default: nil
        }
    }
}
