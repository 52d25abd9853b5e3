import Foundation
import Hummingbird

/// Small server-rendered pages for redirect flows that cannot go on (bad callback, bad request).
/// Everything interpolated is HTML-escaped; no script, so the CSP holds.
enum HTMLPage {
    static func escape(_ text: String) -> String {
        var out = ""
        for ch in text.unicodeScalars {
            switch ch {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(ch)
            }
        }
        return out
    }

    /// A page that explains what went wrong; `back` (already in the client's own error form) is a
    /// link the user may follow, never an automatic redirect.
    /// What the page's one link is: back to the app (in its error form), Keyfob's start page, or
    /// the same page on localhost.
    enum Link { case backToClient, home, localhost }

    /// Keyfob's header, as every page in Public/ has it: a page from the server is Keyfob's too.
    static let header = #"<header class="top"><a class="brand" href="/"><img src="/favicon.svg" alt="" width="22" height="22"> Keyfob</a></header>"#

    static func problem(
        title: String, message: String, back: String? = nil, client: String? = nil,
        status: HTTPResponse.Status = .badRequest, link: Link = .backToClient
    ) -> Response {
        var body = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Keyfob — \(escape(title))</title><link rel="icon" href="/favicon.svg" type="image/svg+xml">
            <link rel="stylesheet" href="/style.css"></head>
            <body>\(header)<main><h1>\(escape(title))</h1>
            <section class="card"><p id="problem">\(escape(message))</p>
            """
        if let back, link == .localhost {
            body += #"<a id="localhost" class="button" href="\#(escape(back))">Open \#(escape(back))</a>"#
        } else if let back, link == .home {
            body += #"<a id="home" class="button secondary" href="\#(escape(back))">Go to Keyfob's start page</a>"#
        } else if let back {
            body += #"<a id="back" class="button secondary" href="\#(escape(back))">Back to \#(escape(client ?? "the app"))</a>"#
            body += #"<p class="hint">The app will be told the request could not be handled.</p>"#
        } else {
            body += #"<p class="hint">Nothing was signed or stored. You can close this window.</p>"#
        }
        body += "</section></main></body></html>"
        return Response(
            status: status, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    /// `/callback.html`, the NIP-07 callback page, rendered with the one origin the server read
    /// from its query (`OwnCallback.pageOrigin`): `callback.js` posts the result to that origin and
    /// to no other, and never reads an origin from the URL itself. A query with no origin, two, or
    /// one that is not canonical gets the page without one: nothing is posted anywhere.
    static func nip07Callback(query: String) -> Response {
        let origin = OwnCallback.pageOrigin(ofQuery: query)
        let body = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Keyfob — returning to the app</title><link rel="icon" href="/favicon.svg" type="image/svg+xml">
            <link rel="stylesheet" href="/style.css"></head>
            <body\(origin.map { #" data-origin="\#(escape($0))""# } ?? "")><main><h1>Returning to the app…</h1>
            <p class="lead" id="status">\(origin == nil
                ? "This window was not opened the way Keyfob opens it, so its result was not sent anywhere. You can close it."
                : "You can close this window.")</p>
            </main><script src="/callback.js"></script></body></html>
            """
        return Response(
            status: origin == nil ? .badRequest : .ok,
            headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}
