package logstore

import (
	"fmt"
	"testing"
)

// files makes contiguous local file records of the given sizes.
func sizedFiles(sizes ...int64) []localFile {
	var out []localFile
	start := int64(1)
	for i, sz := range sizes {
		out = append(out, localFile{start: start, end: start + 10, name: fmt.Sprint(i), fileBytes: sz})
		start += 10
	}
	return out
}

func names(fs []localFile) string {
	s := ""
	for _, f := range fs {
		s += f.name
	}
	return s
}

func TestCompactionMergesFanoutFilesOfOneClass(t *testing.T) {
	const T = 1 << 20 // target; class 1 ≥ T/8, class 2 ≥ T/64, class 3 ≥ T/512
	c1, c2, c3 := int64(T/8), int64(T/64), int64(T/512)
	for _, tc := range []struct {
		name       string
		sizes      []int64
		publishing []Span
		flush      bool
		want       string
	}{
		{"seven small files wait", []int64{c3, c3, c3, c3, c3, c3, c3}, nil, false, ""},
		{"eight small files merge", []int64{c3, c3, c3, c3, c3, c3, c3, c3, c3}, nil, false, "01234567"},
		{"finished files are left alone", []int64{T, c3, c3, c3, c3, c3, c3, c3, c3}, nil, false, "12345678"},
		{"big files do not absorb one small one", []int64{c1, c1, c1, c1, c1, c1, c1, c3}, nil, false, ""},
		{"small files merge before larger ones", []int64{c2, c2, c2, c2, c2, c2, c2, c2, c3, c3, c3, c3, c3, c3, c3, c3}, nil, false, "89101112131415"},
		{"a smaller file between is carried along", []int64{c2, c2, c2, c3 / 10, c2, c2, c2, c2, c2}, nil, false, "012345678"},
		{"a file being published splits the stretch", []int64{c3, c3, c3, c3, c3, c3, c3, c3}, []Span{{Start: 31, End: 41}}, false, ""},
		{"a gap splits the stretch", []int64{c3, c3, c3, c3}, nil, true, "0123"},
		{"flush merges any stretch of two", []int64{T, c1, c3}, nil, true, "12"},
		{"flush leaves single files", []int64{c1, T, c3}, nil, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := names(pickMerge(sizedFiles(tc.sizes...), tc.publishing, T, tc.flush))
			if got != tc.want {
				t.Fatalf("merge %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCompactionRewritesARowAFewTimes feeds seal-sized files through the
// policy to a finished file and counts how often each byte is rewritten,
// and how many files wait at most.
func TestCompactionRewritesARowAFewTimes(t *testing.T) {
	const target, seal = 512 << 20, 512 << 10
	var files []localFile
	var written, sealed int64
	maxFiles := 0
	next := int64(1)
	for sealed < 4*target {
		files = append(files, localFile{start: next, end: next + 1, name: fmt.Sprint(next), fileBytes: seal})
		next++
		sealed += seal
		for {
			run := pickMerge(files, nil, target, false)
			if run == nil {
				break
			}
			var sum int64
			for _, f := range run {
				sum += f.fileBytes
			}
			written += sum
			i := 0
			for files[i].start != run[0].start {
				i++
			}
			merged := localFile{start: run[0].start, end: run[len(run)-1].end, name: "m", fileBytes: sum}
			files = append(files[:i], append([]localFile{merged}, files[i+len(run):]...)...)
		}
		unfinished := 0
		for _, f := range files {
			if f.fileBytes < target {
				unfinished++
			}
		}
		maxFiles = max(maxFiles, unfinished)
	}
	amp := float64(written) / float64(sealed)
	t.Logf("each sealed byte rewritten %.2f times; at most %d unfinished files", amp, maxFiles)
	if amp > 5 || maxFiles > 4*fanout {
		t.Fatalf("rewrites per byte %.2f (want ≤ 5), unfinished files up to %d (want ≤ %d)", amp, maxFiles, 4*fanout)
	}
}
