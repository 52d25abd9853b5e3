package main

import (
	"database/sql"
	"encoding/json"
	"log"
	"time"

	"github.com/duo-labs/webauthn/webauthn"
	_ "github.com/lib/pq"
)

// pgCeremonies keeps unfinished ceremonies in PostgreSQL, so any instance on the database can
// finish one: an UNLOGGED table (a crash may lose them, as a restart loses Keyfob's in-memory
// ones), each row taken once with DELETE … RETURNING.
type pgCeremonies struct {
	put_, take_, sweep_ *sql.Stmt
}

func (p *pgCeremonies) put(key string, c ceremony) error {
	data, err := json.Marshal(struct {
		Session  webauthn.SessionData `json:"session"`
		Username string               `json:"username"`
		Handle   []byte               `json:"handle"`
	}{c.session, c.username, c.handle})
	if err != nil {
		return err
	}
	_, err = p.put_.Exec(key, data, c.expires.Unix())
	return err
}

func (p *pgCeremonies) take(key string) (ceremony, bool) {
	var data []byte
	var expires int64
	if err := p.take_.QueryRow(key).Scan(&data, &expires); err != nil {
		return ceremony{}, false
	}
	var stored struct {
		Session  webauthn.SessionData `json:"session"`
		Username string               `json:"username"`
		Handle   []byte               `json:"handle"`
	}
	if err := json.Unmarshal(data, &stored); err != nil {
		return ceremony{}, false
	}
	c := ceremony{session: stored.Session, username: stored.Username, handle: stored.Handle, expires: time.Unix(expires, 0)}
	return c, time.Now().Before(c.expires)
}

func (p *pgCeremonies) sweep(now time.Time) {
	if _, err := p.sweep_.Exec(now.Unix()); err != nil {
		log.Println("sweep:", err)
	}
}

const pgSchema = `
CREATE TABLE IF NOT EXISTS users (id BIGSERIAL PRIMARY KEY, handle BYTEA NOT NULL UNIQUE, name TEXT NOT NULL UNIQUE, created_at BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS credentials (id BYTEA PRIMARY KEY, user_id BIGINT NOT NULL REFERENCES users(id), public_key BYTEA NOT NULL,
  sign_count BIGINT NOT NULL, created_at BIGINT NOT NULL, last_used_at BIGINT);
CREATE TABLE IF NOT EXISTS sessions (token_hash BYTEA PRIMARY KEY, user_id BIGINT NOT NULL REFERENCES users(id), created_at BIGINT NOT NULL);
CREATE UNLOGGED TABLE IF NOT EXISTS ceremonies (key TEXT PRIMARY KEY, data BYTEA NOT NULL, expires_at BIGINT NOT NULL);
`

// openPostgres: one pool for everything, sized for the machine's two cores and the harness's 32
// connections; every statement prepared once (lib/pq prepares on each connection as it is used).
func openPostgres(url string, rp *webauthn.WebAuthn) *server {
	db, err := sql.Open("postgres", url)
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	if _, err := db.Exec(pgSchema); err != nil {
		log.Fatal(err)
	}
	s := &server{rp: rp, db: db, reads: db, ceremonies: map[string]ceremony{},
		addUser:    `INSERT INTO users (handle, name, created_at) VALUES ($1, $2, $3) RETURNING id`,
		addPasskey: `INSERT INTO credentials (id, user_id, public_key, sign_count, created_at) VALUES ($1, $2, $3, $4, $5)`}
	s.passkey = prepare(db, `SELECT u.id, u.handle, u.name, c.public_key, c.sign_count FROM credentials c
		JOIN users u ON u.id = c.user_id WHERE c.id = $1 AND u.handle = $2`)
	s.countSwap = prepare(db, `UPDATE credentials SET sign_count = $1, last_used_at = $2 WHERE id = $3 AND sign_count = $4`)
	s.addSession = prepare(db, `INSERT INTO sessions (token_hash, user_id, created_at) VALUES ($1, $2, $3)`)
	s.pg = &pgCeremonies{
		put_:   prepare(db, `INSERT INTO ceremonies (key, data, expires_at) VALUES ($1, $2, $3)`),
		take_:  prepare(db, `DELETE FROM ceremonies WHERE key = $1 RETURNING data, expires_at`),
		sweep_: prepare(db, `DELETE FROM ceremonies WHERE expires_at < $1`),
	}
	return s
}
