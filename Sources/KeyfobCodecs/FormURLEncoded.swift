/// Query strings as the WHATWG URL standard's `application/x-www-form-urlencoded` parser reads
/// them — what `URLSearchParams`, Python's `urlencode`, Java's `URLEncoder` and PHP write: pairs
/// split on `&`, name and value on the first `=`, `+` is a space, then percent-decoding (a
/// literal `+` is `%2B`). Strict where browsers are lenient: a pair that does not percent-decode
/// to UTF-8 makes the whole query unreadable (nil), so no two readers can see different values.
public enum FormURLEncoded {
    public static func items(_ query: some StringProtocol) -> [(name: String, value: String)]? {
        var items: [(name: String, value: String)] = []
        for part in query.split(separator: "&", omittingEmptySubsequences: true) {
            let pair = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = decode(pair[0]), let value = decode(pair.count > 1 ? pair[1] : "") else { return nil }
            items.append((name, value))
        }
        return items
    }

    /// One name or value: `+` as a space, then percent-decoding; nil if that fails.
    public static func decode(_ text: some StringProtocol) -> String? {
        String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }
}
