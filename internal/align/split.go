package align

// SplitFraction is the split-I/O model of DESIGN.md §1: the predicted share
// of I/Os of size ioSize that straddle a boundary of unit bytes, when the
// volume starts at absolute byte offset and its I/Os are placed on a grid of
// grid bytes inside the volume (grid = min(I/O size, allocation unit)).
//
// The I/O starts are offset + k·grid for k = 0, 1, 2, ...; modulo unit they
// take every residue r ≡ offset (mod d), d = gcd(grid, unit), equally often.
// An I/O of size S < unit starting at residue r splits iff r+S > unit; one of
// size S == unit splits unless r == 0; a larger one always splits. Counting
// residues gives the share in closed form, with no loop over the period.
//
// It returns 0 when unit or ioSize is 0 (nothing to split against) and uses
// grid = ioSize when grid is 0.
func SplitFraction(offset, ioSize, grid, unit uint64) float64 {
	split, n := splitCount(offset, ioSize, grid, unit)
	if n == 0 {
		return 0
	}
	return float64(split) / float64(n)
}

// SplitShares divides SplitFraction into its two causes. offsetCaused is
// the share that splits because of where the volume starts: the total
// minus what the same I/Os would split at an aligned offset (a multiple
// of unit). granularity is that aligned-offset share: I/Os placed on a
// grid finer than their size (grid < ioSize) straddle boundaries however
// the volume is placed, so it is no misalignment and no re-partitioning
// removes it. offsetCaused + granularity == SplitFraction; both are exact
// ratios of the same period, never negative.
func SplitShares(offset, ioSize, grid, unit uint64) (offsetCaused, granularity float64) {
	split, n := splitCount(offset, ioSize, grid, unit)
	if n == 0 {
		return 0, 0
	}
	base, _ := splitCount(0, ioSize, grid, unit)
	if base > split { // cannot happen: an aligned offset splits least
		base = split
	}
	return float64(split-base) / float64(n), float64(base) / float64(n)
}

// splitCount counts, over one period of n I/O start residues, the starts
// whose I/O splits. n is 0 when there is nothing to split against.
func splitCount(offset, ioSize, grid, unit uint64) (split, n uint64) {
	if unit == 0 || ioSize == 0 {
		return 0, 0
	}
	if grid == 0 {
		grid = ioSize
	}
	d := gcd(grid, unit)
	n = unit / d // residues per period
	switch {
	case ioSize > unit:
		return n, n
	case ioSize == unit:
		if offset%d != 0 {
			return n, n // no start ever lands on a boundary
		}
		// Starts land on a boundary once per unit/d positions.
		return n - 1, n
	}
	c := offset % d
	// Residues are c + j·d, j in [0, n). Split iff c + j·d > unit - ioSize.
	limit := unit - ioSize
	if c > limit {
		return n, n
	}
	fit := (limit-c)/d + 1 // residues with c + j·d <= limit
	if fit > n {
		fit = n
	}
	return n - fit, n
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func lcm(a, b uint64) uint64 {
	if a == 0 || b == 0 {
		return 0
	}
	return a / gcd(a, b) * b
}

// RMWFraction is the share of writes of size ioSize, placed as in
// SplitFraction, that start or end inside a physical sector of sector
// bytes: a 512e drive must read the whole sector, merge and write it back.
// A write that is not a whole number of sectors always does; one that is
// does so iff it starts off a sector boundary.
func RMWFraction(offset, ioSize, grid, sector uint64) float64 {
	if sector == 0 || ioSize == 0 {
		return 0
	}
	if ioSize%sector != 0 {
		return 1
	}
	if grid == 0 {
		grid = ioSize
	}
	d := gcd(grid, sector)
	if offset%d != 0 {
		return 1
	}
	n := sector / d // starts land on a sector boundary once per n positions
	return float64(n-1) / float64(n)
}
