// A relying party in Go with Keyfob's ceremony wire format, for `make load` to measure beside
// Keyfob in the same run (BENCHMARKS.md). duo-labs/webauthn for the ceremonies, net/http, and
// SQLite in WAL mode (mattn/go-sqlite3) for users, passkeys and sessions: as durable as Keyfob's
// SQLite store (synchronous=NORMAL), a sign count updated and a session row written per login.
// Unfinished ceremonies live in memory, as Keyfob's do on SQLite.
//
// With -postgres URL it keeps everything in PostgreSQL instead (lib/pq), as several instances on
// one database must: unfinished ceremonies in an UNLOGGED table, each taken once with
// DELETE … RETURNING (any instance can finish a ceremony), and a sign-in's counter update and
// session insert in one transaction (postgres.go).
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o peer-go .
//	./peer-go -listen 127.0.0.1:18081 -origin http://localhost:18081 -db /tmp/peer-go.sqlite
//	./peer-go -listen 127.0.0.1:18081 -origin http://localhost:18081 -postgres postgres://keyfob@127.0.0.1:5432/db
package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log"
	"net/http"
	_ "net/http/pprof" // only on -pprof's own listener: the peer's mux below does not carry it
	"sync"
	"time"

	"github.com/duo-labs/webauthn/protocol"
	"github.com/duo-labs/webauthn/webauthn"
	_ "github.com/mattn/go-sqlite3"
)

const ceremonyTimeout = 10 * time.Minute // long enough for the harness's pre-signed logins

type user struct {
	id          int64
	handle      []byte
	name        string
	credentials []webauthn.Credential
}

func (u *user) WebAuthnID() []byte                         { return u.handle }
func (u *user) WebAuthnName() string                       { return u.name }
func (u *user) WebAuthnDisplayName() string                { return u.name }
func (u *user) WebAuthnIcon() string                       { return "" }
func (u *user) WebAuthnCredentials() []webauthn.Credential { return u.credentials }

type ceremony struct {
	session  webauthn.SessionData
	username string
	handle   []byte
	expires  time.Time
}

type server struct {
	rp         *webauthn.WebAuthn
	db         *sql.DB // one connection: SQLite has one writer, and waiting in Go beats its busy handler's sleeps
	reads      *sql.DB // read-only connections beside it (WAL)
	mu         sync.Mutex
	ceremonies map[string]ceremony
	// The login's statements, prepared once: database/sql otherwise prepares (and SQLite compiles)
	// each statement text on every call.
	passkey, countSwap, addSession *sql.Stmt
	// PostgreSQL mode: ceremonies in the database (nil on SQLite: in memory).
	pg *pgCeremonies
	// The registration's two inserts, in each database's dialect.
	addUser, addPasskey string
}

func randomText(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func reply(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

func refuse(w http.ResponseWriter, status int, code string) {
	reply(w, status, map[string]string{"error": code})
}

func (s *server) remember(c ceremony) string {
	key := randomText(16)
	c.expires = time.Now().Add(ceremonyTimeout)
	if s.pg != nil {
		if err := s.pg.put(key, c); err != nil {
			return ""
		}
		return key
	}
	s.mu.Lock()
	s.ceremonies[key] = c
	s.mu.Unlock()
	return key
}

// take removes a ceremony: each challenge answers once.
func (s *server) take(key string) (ceremony, bool) {
	if s.pg != nil {
		return s.pg.take(key)
	}
	s.mu.Lock()
	c, ok := s.ceremonies[key]
	delete(s.ceremonies, key)
	s.mu.Unlock()
	return c, ok && time.Now().Before(c.expires)
}

// splice returns the options document with the challengeKey beside the WebAuthn fields, and the
// challenge in base64url as Keyfob writes it (the library's JSON uses standard base64).
func splice(options any, extra map[string]any) (map[string]any, error) {
	raw, err := json.Marshal(options)
	if err != nil {
		return nil, err
	}
	var fields map[string]any
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	for k, v := range extra {
		fields[k] = v
	}
	return fields, nil
}

func (s *server) registrationOptions(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("username")
	if name == "" || len(name) > 64 {
		refuse(w, 400, "invalid_username")
		return
	}
	handle := make([]byte, 16)
	rand.Read(handle)
	u := &user{handle: handle, name: name}
	creation, session, err := s.rp.BeginRegistration(u, webauthn.WithResidentKeyRequirement(protocol.ResidentKeyRequirementRequired))
	if err != nil {
		refuse(w, 500, "internal")
		return
	}
	key := s.remember(ceremony{session: *session, username: name, handle: handle})
	body, err := splice(creation.Response, map[string]any{"challengeKey": key, "challenge": session.Challenge})
	if err != nil {
		refuse(w, 500, "internal")
		return
	}
	reply(w, 200, body)
}

type verifyBody struct {
	Username     string          `json:"username"`
	ChallengeKey string          `json:"challengeKey"`
	Cred         json.RawMessage `json:"cred"`
}

func readBody(r *http.Request) (verifyBody, error) {
	var body verifyBody
	err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&body)
	if err == nil && (body.ChallengeKey == "" || len(body.Cred) == 0) {
		err = errors.New("missing fields")
	}
	return body, err
}

func (s *server) verifyRegistration(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		refuse(w, 400, "invalid_body")
		return
	}
	c, ok := s.take(body.ChallengeKey)
	if !ok || c.username != body.Username {
		refuse(w, 400, "challenge_not_found")
		return
	}
	parsed, err := protocol.ParseCredentialCreationResponseBody(bytes.NewReader(body.Cred))
	if err != nil {
		refuse(w, 400, "invalid_credential")
		return
	}
	u := &user{handle: c.handle, name: c.username}
	credential, err := s.rp.CreateCredential(u, c.session, parsed)
	if err != nil {
		refuse(w, 400, "verification_failed")
		return
	}
	now := time.Now().Unix()
	s.transact(w, func(tx *sql.Tx) (int64, string, int, string) {
		var id int64
		if s.pg != nil {
			if err := tx.QueryRow(s.addUser, c.handle, c.username, now).Scan(&id); err != nil {
				return 0, "", 409, "username_taken"
			}
		} else {
			result, err := tx.Exec(s.addUser, c.handle, c.username, now)
			if err != nil {
				return 0, "", 409, "username_taken"
			}
			id, _ = result.LastInsertId()
		}
		if _, err = tx.Exec(s.addPasskey, credential.ID, id, credential.PublicKey, int64(credential.Authenticator.SignCount), now); err != nil {
			return 0, "", 409, "credential_exists"
		}
		return id, c.username, 0, ""
	})
}

// transact runs body in the write transaction and, when body names a user, starts a session for
// them in the same transaction and answers with its token.
func (s *server) transact(w http.ResponseWriter, body func(tx *sql.Tx) (userID int64, name string, status int, code string)) {
	token := randomText(32)
	digest := sha256.Sum256([]byte(token))
	tx, err := s.db.Begin()
	if err != nil {
		refuse(w, 500, "internal")
		return
	}
	defer tx.Rollback()
	id, name, status, code := body(tx)
	if code != "" {
		refuse(w, status, code)
		return
	}
	if _, err = tx.Stmt(s.addSession).Exec(digest[:], id, time.Now().Unix()); err != nil {
		refuse(w, 500, "internal")
		return
	}
	if err = tx.Commit(); err != nil {
		refuse(w, 500, "internal")
		return
	}
	reply(w, 200, map[string]any{"verified": true, "username": name, "token": token})
}

// signInOptions is the sign-in options document, written in one pass (the options are few and flat).
type signInOptions struct {
	Challenge        string                               `json:"challenge"`
	ChallengeKey     string                               `json:"challengeKey"`
	RPID             string                               `json:"rpId"`
	Timeout          int                                  `json:"timeout"`
	UserVerification protocol.UserVerificationRequirement `json:"userVerification,omitempty"`
}

func (s *server) authenticationOptions(w http.ResponseWriter, r *http.Request) {
	assertion, session, err := s.rp.BeginDiscoverableLogin()
	if err != nil {
		refuse(w, 500, "internal")
		return
	}
	key := s.remember(ceremony{session: *session})
	options := assertion.Response
	reply(w, 200, signInOptions{Challenge: session.Challenge, ChallengeKey: key, RPID: options.RelyingPartyID,
		Timeout: options.Timeout, UserVerification: options.UserVerification})
}

func (s *server) verifyAuthentication(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		refuse(w, 400, "invalid_body")
		return
	}
	c, ok := s.take(body.ChallengeKey)
	if !ok {
		refuse(w, 400, "challenge_not_found")
		return
	}
	parsed, err := protocol.ParseCredentialRequestResponseBody(bytes.NewReader(body.Cred))
	if err != nil {
		refuse(w, 400, "invalid_credential")
		return
	}
	var owner *user
	lookup := func(rawID, handle []byte) (webauthn.User, error) {
		u := &user{}
		var credential webauthn.Credential
		// One read: the passkey with its account.
		err := s.passkey.QueryRow(rawID, handle).Scan(&u.id, &u.handle, &u.name, &credential.PublicKey, &credential.Authenticator.SignCount)
		if err != nil {
			return nil, err
		}
		credential.ID = rawID
		u.credentials = []webauthn.Credential{credential}
		owner = u
		return u, nil
	}
	credential, err := s.rp.ValidateDiscoverableLogin(lookup, c.session, parsed)
	if err != nil || credential.Authenticator.CloneWarning {
		refuse(w, 400, "verification_failed")
		return
	}
	// The counter moves only from what was read: a concurrent login with the same count loses.
	previous := owner.credentials[0].Authenticator.SignCount
	s.transact(w, func(tx *sql.Tx) (int64, string, int, string) {
		result, err := tx.Stmt(s.countSwap).Exec(int64(credential.Authenticator.SignCount), time.Now().Unix(), credential.ID, int64(previous))
		if err != nil {
			return 0, "", 500, "internal"
		}
		if n, _ := result.RowsAffected(); n != 1 {
			return 0, "", 409, "counter_conflict"
		}
		return owner.id, owner.name, 0, ""
	})
}

func (s *server) sweep() {
	for range time.Tick(30 * time.Second) {
		now := time.Now()
		if s.pg != nil {
			s.pg.sweep(now)
			continue
		}
		s.mu.Lock()
		for k, c := range s.ceremonies {
			if now.After(c.expires) {
				delete(s.ceremonies, k)
			}
		}
		s.mu.Unlock()
	}
}

const schema = `
PRAGMA journal_mode = WAL;
CREATE TABLE IF NOT EXISTS users (id INTEGER PRIMARY KEY, handle BLOB NOT NULL UNIQUE, name TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS credentials (id BLOB PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users(id), public_key BLOB NOT NULL,
  sign_count INTEGER NOT NULL, created_at INTEGER NOT NULL, last_used_at INTEGER);
CREATE TABLE IF NOT EXISTS sessions (token_hash BLOB PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users(id), created_at INTEGER NOT NULL);
`

func main() {
	listen := flag.String("listen", "127.0.0.1:18081", "address to listen on")
	origin := flag.String("origin", "http://localhost:18081", "the origin browsers sign from")
	rpID := flag.String("rp-id", "localhost", "the relying party id")
	path := flag.String("db", "peer-go.sqlite", "SQLite database file")
	profile := flag.String("pprof", "", "serve net/http/pprof on this address (off when empty)")
	postgres := flag.String("postgres", "", "a PostgreSQL URL: keep users, passkeys, sessions and ceremonies there instead")
	flag.Parse()
	rp, err := webauthn.New(&webauthn.Config{RPDisplayName: "Go peer", RPID: *rpID, RPOrigin: *origin})
	if err != nil {
		log.Fatal(err)
	}
	var s *server
	if *postgres != "" {
		s = openPostgres(*postgres, rp)
	} else {
		s = openSQLite(*path, rp)
	}
	go s.sweep()
	if *profile != "" {
		// go tool pprof http://<profile>/debug/pprof/profile?seconds=10 (BENCHMARKS.md "Where a login's CPU goes").
		go func() { log.Println(http.ListenAndServe(*profile, nil)) }()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/generate-registration-options", s.registrationOptions)
	mux.HandleFunc("/verify-registration", s.verifyRegistration)
	mux.HandleFunc("/generate-authentication-options", s.authenticationOptions)
	mux.HandleFunc("/verify-authentication", s.verifyAuthentication)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { reply(w, 200, map[string]string{"status": "ok"}) })
	log.Printf("Go peer on http://%s (rpId %s, origin %s)", *listen, *rpID, *origin)
	log.Fatal(http.ListenAndServe(*listen, mux))
}

func prepare(on *sql.DB, text string) *sql.Stmt {
	statement, err := on.Prepare(text)
	if err != nil {
		log.Fatal(err)
	}
	return statement
}

func openSQLite(path string, rp *webauthn.WebAuthn) *server {

	// synchronous=NORMAL in WAL mode, as Keyfob's store: a crash may lose the last commits, never corrupt.
	// Keyfob's layout too: one writer connection, and read-only connections beside it.
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_synchronous=NORMAL&_busy_timeout=5000&_txlock=immediate")
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schema); err != nil {
		log.Fatal(err)
	}
	reads, err := sql.Open("sqlite3", "file:"+path+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		log.Fatal(err)
	}
	reads.SetMaxOpenConns(4)
	reads.SetMaxIdleConns(4)
	s := &server{rp: rp, db: db, reads: reads, ceremonies: map[string]ceremony{},
		addUser:    `INSERT INTO users (handle, name, created_at) VALUES (?, ?, ?)`,
		addPasskey: `INSERT INTO credentials (id, user_id, public_key, sign_count, created_at) VALUES (?, ?, ?, ?, ?)`}
	s.passkey = prepare(reads, `SELECT u.id, u.handle, u.name, c.public_key, c.sign_count FROM credentials c
		JOIN users u ON u.id = c.user_id WHERE c.id = ? AND u.handle = ?`)
	s.countSwap = prepare(db, `UPDATE credentials SET sign_count = ?, last_used_at = ? WHERE id = ? AND sign_count = ?`)
	s.addSession = prepare(db, `INSERT INTO sessions (token_hash, user_id, created_at) VALUES (?, ?, ?)`)
	return s
}
