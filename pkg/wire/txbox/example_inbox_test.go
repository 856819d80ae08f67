package txbox_test

import (
	"context"
	"database/sql"
	"log"

	"github.com/streamcast/streamcast/pkg/wire/txbox"
)

// An application receives the trades stream into its own SQLite database:
// each row is applied in the transaction that also deletes it from the
// inbox, so a crash anywhere neither loses a row nor applies it twice.
func ExampleNewInbox() {
	ctx := context.Background()
	db, d, err := txbox.OpenDSN("sqlite:///var/lib/billing/app.db")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	in, err := txbox.NewInbox(ctx, db, d, "ws://127.0.0.1:8765/trades", "billing", txbox.InboxOptions{
		Window:        txbox.Window{MaxRows: 10_000},
		OnPauseChange: func(paused bool) { log.Printf("inbox paused: %v", paused) },
	})
	if err != nil {
		log.Fatal(err) // a *txbox.StreamMismatch when the stream was recreated
	}
	defer in.Close()
	for {
		m, tx, err := in.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		var trade struct {
			Symbol string
			Price  float64
		}
		if err := m.Unmarshal(&trade); err != nil {
			log.Fatal(err)
		}
		if err := apply(ctx, tx, d, m.Offset, trade.Symbol, trade.Price); err != nil {
			log.Fatal(err) // the transaction dies with the process: the row is handed out again
		}
		if err := tx.Commit(); err != nil {
			log.Fatal(err)
		}
	}
}

func apply(ctx context.Context, tx *sql.Tx, d txbox.Dialect, offset int64, symbol string, price float64) error {
	_, err := tx.ExecContext(ctx, d.Rebind("INSERT INTO invoices (trade_offset, symbol, price) VALUES (?, ?, ?)"), offset, symbol, price)
	return err
}
