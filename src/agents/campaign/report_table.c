/* The findings table both reports write (rp_finding_rows): one row a finding, the same columns
 * in the same order; the Markdown and HTML writers give only their markup. */
#include "agents/campaign/report_int.h"

void rp_finding_rows(fl_sb *b, const rp_data *d, const rp_markup *m) {
    for (int i = 0; i < d->n_find; i++) {
        const rp_finding *f = &d->find[i];
        fl_sb_printf(b, "%s%s%d%s%s", m->row_open, m->num_open, i + 1, m->cell_close, m->cell_open);
        m->text(b, f->s.kind ? f->s.kind : "?");
        fl_sb_printf(b, "%s%s", m->cell_close, m->cell_open);
        m->text(b, f->s.mast ? f->s.mast : "");
        fl_sb_printf(b, "%s%s%s", m->cell_close, m->cell_open, m->code_open);
        m->text(b, f->s.signature ? f->s.signature : "");
        fl_sb_printf(b, "%s%s%s", m->code_close, m->cell_close, m->num_open);
        if (f->s.found_exec >= 0) fl_sb_printf(b, "%.0f", f->s.found_exec);
        fl_sb_printf(b, "%s%s", m->cell_close, m->cell_open);
        m->text(b, f->input);
        fl_sb_printf(b, "%s%s", m->cell_close, m->cell_open);
        m->link(b, f->rel);
        fl_sb_printf(b, "%s%s", m->cell_close, m->row_close);
    }
}
