import type { Series } from "../api/client";
import { byteMatrix, formatValue } from "./metricFamilies";

/** Bytes each party sent each other party over the job, from the ranks' per-peer counters. */
export function ByteMatrix({ series, partyOf }: { series: Series[]; partyOf: (rank: number) => string | undefined }) {
  const { parties, bytes } = byteMatrix(series, partyOf);
  if (parties.length === 0) return null;
  return (
    <section className="panel" aria-label="Bytes between parties" style={{ overflowX: "auto" }}>
      <h3>Bytes between parties</h3>
      <table className="matrix">
        <thead>
          <tr>
            <th scope="col">from ↓ to →</th>
            {parties.map((p) => (
              <th key={p} scope="col">
                {p}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {parties.map((from) => (
            <tr key={from}>
              <th scope="row">{from}</th>
              {parties.map((to) => {
                const v = bytes.get(`${from}\u0000${to}`);
                return (
                  <td key={to} className="num" data-from={from} data-to={to}>
                    {v === undefined ? "—" : formatValue(v, "bytes")}
                  </td>
                );
              })}
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
