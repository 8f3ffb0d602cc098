package manifest

import "testing"

func BenchmarkDecodeAliasBomb(b *testing.B) {
	data := []byte(aliasBomb)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, ps := DecodeFile("bomb.yaml", data, DecodeOptions{}); len(ps) != 1 {
			b.Fatal("alias bomb accepted")
		}
	}
}
