/* The table of coverage criteria that spec strings ("nc:0.5,kmnc:1000") and
 * `flare nn cover --criteria` know by name.
 *
 * Adding a criterion (IDC, LSC, DSC, ...): define `const fl_cover_ops fl_cover_NAME` in your
 * source (see cover.h, "Writing a criterion"), declare it below and add it to the table. */
#include <string.h>

#include "cover_int.h"
#include "flare/lrp.h" /* fl_cover_idc */
#include "flare/sa.h"  /* fl_cover_lsc, fl_cover_dsc */

static const fl_cover_ops *const table[] = {
    &fl_cover_nc, &fl_cover_kmnc, &fl_cover_nbc, &fl_cover_snac, &fl_cover_tknc, &fl_cover_tknp,
    &fl_cover_idc, &fl_cover_lsc, &fl_cover_dsc,
    NULL,
};

const fl_cover_ops *const *fl_cover_all(void) { return table; }

const fl_cover_ops *fl_cover_find(const char *name) {
    for (const fl_cover_ops *const *p = table; *p; p++)
        if (strcmp((*p)->name, name) == 0) return *p;
    return NULL;
}
