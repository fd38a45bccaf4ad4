package datagen

import (
	"encoding/json"
	"testing"
)

// An event is valid JSON of about the asked size, with its fields as given.
func TestEvent(t *testing.T) {
	b := Event("k42", 7, 1764688090000, 100)
	if len(b) != 100 {
		t.Errorf("len = %d, want 100", len(b))
	}
	var v struct {
		Key    string `json:"key"`
		Amount int    `json:"amount"`
		TS     int64  `json:"ts"`
		Pad    string `json:"pad"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if v.Key != "k42" || v.Amount != 7 || v.TS != 1764688090000 || v.Pad == "" {
		t.Errorf("decoded %+v from %s", v, b)
	}
}
