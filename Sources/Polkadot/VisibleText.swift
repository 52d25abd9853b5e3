/// Text a person reads exactly as it is: control characters (but the line break), format characters
/// (bidi overrides such as U+202E, zero-width spaces and joiners, the BOM), line and paragraph
/// separators and noncharacters written as `\u202E`, so no hidden character makes a signed message,
/// a remark or a call's text argument read differently on screen.
public enum VisibleText {
    /// `text` with every hidden character escaped; `escaped` says whether there was one. A backslash
    /// the text itself holds is then doubled, so `\u202E` on screen is always the escape, never text
    /// that imitates it.
    public static func escaped(_ text: String) -> (text: String, escaped: Bool) {
        guard text.unicodeScalars.contains(where: hidden) else { return (text, false) }
        var out = ""
        for scalar in text.unicodeScalars {
            if hidden(scalar) {
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            } else if scalar == "\\" {
                out += "\\\\"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return (out, true)
    }

    /// UTF-8 bytes as visible text; nil when they are not UTF-8.
    public static func escaped(utf8 bytes: [UInt8]) -> (text: String, escaped: Bool)? {
        String(validating: bytes, as: UTF8.self).map(escaped)
    }

    /// `text` in quotes as a call's argument is shown: every hidden character and the line break as
    /// `\uXXXX`, the quote and the backslash always escaped, so the quoted text cannot end early or
    /// imitate an escape.
    public static func quoted(_ text: String, quote: Character = "\"") -> String {
        var out = String(quote)
        for scalar in text.unicodeScalars {
            if hidden(scalar) || scalar == "\n" {
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            } else if scalar == "\\" || Character(scalar) == quote {
                out += "\\"
                out.unicodeScalars.append(scalar)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out + String(quote)
    }

    static func hidden(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control: scalar != "\n"
        case .format, .lineSeparator, .paragraphSeparator: true
        default: scalar.properties.isNoncharacterCodePoint
        }
    }
}
