package conf

import (
	"strings"
	"testing"
)

func TestRenderingRedactsSecretsAtAnyDepth(t *testing.T) {
	type user struct {
		Name string `yaml:"name"`
		Hash string `yaml:"password_hash" secret:"true"`
	}
	type section struct {
		Users  []user   `yaml:"users"`
		Token  *string  `yaml:"token" secret:"true"`
		Keys   []string `yaml:"keys" secret:"true"`
		Public string   `yaml:"public"`
	}
	tok := "tok-123"
	v := section{Users: []user{{Name: "ann", Hash: "$2a$hash-1"}}, Token: &tok, Keys: []string{"key-2"}, Public: "visible"}
	out, err := JSON(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"hash-1", "tok-123", "key-2"} {
		if strings.Contains(string(out), secret) {
			t.Errorf("rendering shows the secret %q: %s", secret, out)
		}
	}
	if !strings.Contains(string(out), `"password_hash":"[redacted]"`) || !strings.Contains(string(out), "visible") || !strings.Contains(string(out), "ann") {
		t.Errorf("rendering %s: want the hash redacted and the rest shown", out)
	}
	if v.Users[0].Hash != "$2a$hash-1" || tok != "tok-123" || v.Keys[0] != "key-2" {
		t.Errorf("redaction changed the value it rendered: %+v", v)
	}
}
