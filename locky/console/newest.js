// Newest-first pages of a list the API gives oldest first (keyset paged: records with
// id > after_id, ascending, docs/http/README.md#lists), without reading the whole list.
//
// A page is the ``size`` newest records with id < ``before`` (no bound for the first
// page). A probe reads one request of at most ``probe`` records from ``after_id = low``;
// it is "whole" when it reaches ``before`` or the list's end, so it holds every record
// of (low, before). Lowering ``low`` adds at most one record per id, so: grow ``low``
// from 0 by doubling until a probe is whole, then halve the gap between a whole probe
// with too few records and one that is not whole, until a whole probe holds at least
// ``size``. That is about 2·log2(id) requests at most (a few dozen for billions of
// records; usually one to a handful), each of one bounded page.

const MOST_PROBES = 200; // far above what 64-bit ids need: a guard, not a limit reached

// ``read(afterId, limit)`` → { items (each with an id), next (null on the last page) }.
// Returns { items: newest first, older: the ``before`` of the next older page or null }.
export async function newestPage(read, before, size, probe = 4 * size) {
  let probes = 0;
  async function look(low) {
    if (++probes > MOST_PROBES) throw new Error("the newest events could not be found in a bounded number of requests");
    const { items, next } = await read(low, probe);
    const inside = before === null ? items : items.filter((item) => item.id < before);
    return { low, inside, whole: inside.length < items.length || next === null || next === undefined };
  }
  function done(found) {
    const items = found.inside.slice(-size).reverse();
    const more = found.inside.length > size || found.low > 0;
    return { items, older: more && items.length ? items[items.length - 1].id : null };
  }

  let found = await look(0);
  if (found.whole) return done(found);
  // Grow: ``wide`` is a low whose probe is not whole.
  let wide = found;
  let narrow = null;
  while (!narrow) {
    let low = Math.max(wide.low * 2, wide.inside.length ? wide.inside[wide.inside.length - 1].id : wide.low + probe);
    if (before !== null) low = Math.min(low, before - 1);
    found = await look(low);
    if (!found.whole) { wide = found; continue; }
    if (found.inside.length >= size) return done(found);
    narrow = found;
  }
  // Halve the gap between ``wide`` (not whole) and ``narrow`` (whole, fewer than size).
  while (narrow.low - wide.low > 1) {
    found = await look(Math.floor((wide.low + narrow.low) / 2));
    if (!found.whole) wide = found;
    else if (found.inside.length >= size) return done(found);
    else narrow = found;
  }
  return done(narrow); // not reached while probe > size (one id adds one record at most)
}
